//! A binary max-heap ordered by a caller-supplied comparison.
//!
//! `std::collections::BinaryHeap` needs `Ord` on the element, but the
//! lexicographic tie-break compares the byte strings of the pair's tokens,
//! which live outside the element; passing the comparison in keeps entries at
//! 16 bytes.

#[derive(Clone)]
pub struct Heap<T> {
    v: Vec<T>,
}

impl<T: Copy> Heap<T> {
    pub fn with_capacity(n: usize) -> Self {
        Heap { v: Vec::with_capacity(n) }
    }

    pub fn len(&self) -> usize {
        self.v.len()
    }

    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    /// The element that would come out next.
    pub fn peek(&self) -> Option<&T> {
        self.v.first()
    }

    /// `better(a, b)`: a must come out before b.
    pub fn push(&mut self, x: T, better: &impl Fn(&T, &T) -> bool) {
        self.v.push(x);
        let mut i = self.v.len() - 1;
        while i > 0 {
            let p = (i - 1) / 2;
            if better(&self.v[i], &self.v[p]) {
                self.v.swap(i, p);
                i = p;
            } else {
                break;
            }
        }
    }

    pub fn pop(&mut self, better: &impl Fn(&T, &T) -> bool) -> Option<T> {
        let n = self.v.len();
        if n == 0 {
            return None;
        }
        self.v.swap(0, n - 1);
        let top = self.v.pop();
        self.sift_down(0, better);
        top
    }

    /// Entry `i` moves down until no child of it comes out before it.
    #[inline(always)]
    fn sift_down(&mut self, mut i: usize, better: &impl Fn(&T, &T) -> bool) {
        let n = self.v.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && better(&self.v[r], &self.v[l]) { r } else { l };
            if better(&self.v[c], &self.v[i]) {
                self.v.swap(c, i);
                i = c;
            } else {
                break;
            }
        }
    }

    /// Build from a vector in O(n).
    pub fn from_vec(v: Vec<T>, better: &impl Fn(&T, &T) -> bool) -> Self {
        let mut h = Heap { v };
        for start in (0..h.v.len() / 2).rev() {
            h.sift_down(start, better);
        }
        h
    }

    /// The entries in heap order (entry `i`'s children at `2i + 1` and `2i + 2`).
    pub fn as_slice(&self) -> &[T] {
        &self.v
    }

    /// Entry `i` becomes `x`, which must not come out before it (a lowered
    /// entry: it moves down).
    pub fn lower_at(&mut self, i: usize, x: T, better: &impl Fn(&T, &T) -> bool) {
        debug_assert!(!better(&x, &self.v[i]));
        self.v[i] = x;
        self.sift_down(i, better);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts() {
        let better = |a: &u32, b: &u32| a > b;
        let data = vec![5u32, 1, 9, 3, 3, 7, 0, 12, 8];
        let mut h = Heap::from_vec(data.clone(), &better);
        h.push(4, &better);
        let mut out = vec![];
        while let Some(x) = h.pop(&better) {
            out.push(x);
        }
        let mut want = data;
        want.push(4);
        want.sort_by(|a, b| b.cmp(a));
        assert_eq!(out, want);
    }
}
