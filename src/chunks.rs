//! The one byte-balanced cut of a list of texts (or of anything with a byte
//! size) into runs of consecutive items for the threads: batch encoding
//! (`encoder::encode_flat`), the Python lists built while encoding
//! (`py::encode_lists`), counting and the LZ78 usage passes
//! (`wordcount::even_groups`). Each caller chooses its target size; the cut is
//! the same everywhere.
//!
//! Not handled: cutting inside an item (a long text is a run of its own), and
//! balancing by anything but the size the caller gives.

/// The bounds `[0, .., items.len()]` of runs of consecutive items of about
/// `target` bytes each (`size` of an item): a run closes as soon as it holds
/// `target` bytes or more, so no run but the last is smaller, and a run is at
/// most one item larger. Empty input: `[0]`.
pub fn byte_bounds<T>(items: &[T], size: impl Fn(&T) -> usize, target: usize) -> Vec<usize> {
    let mut bounds = vec![0usize];
    let mut acc = 0;
    for (i, t) in items.iter().enumerate() {
        acc += size(t);
        if acc >= target {
            bounds.push(i + 1);
            acc = 0;
        }
    }
    if *bounds.last().unwrap() != items.len() {
        bounds.push(items.len());
    }
    bounds
}

/// The runs of [`byte_bounds`] as slices (none for empty input).
pub fn byte_groups<T>(items: &[T], size: impl Fn(&T) -> usize, target: usize) -> Vec<&[T]> {
    byte_bounds(items, size, target).windows(2).map(|w| &items[w[0]..w[1]]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_close_at_the_target() {
        let sizes = [3usize, 3, 3, 10, 1, 1];
        assert_eq!(byte_bounds(&sizes, |s| *s, 5), vec![0, 2, 4, 6]);
        assert_eq!(byte_bounds(&sizes, |s| *s, 100), vec![0, 6]);
        assert_eq!(byte_bounds(&sizes, |s| *s, 1), vec![0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(byte_bounds::<usize>(&[], |s| *s, 5), vec![0]);
        let groups = byte_groups(&sizes, |s| *s, 5);
        assert_eq!(groups, vec![&sizes[0..2], &sizes[2..4], &sizes[4..6]]);
        assert!(byte_groups::<usize>(&[], |s| *s, 5).is_empty());
    }
}
