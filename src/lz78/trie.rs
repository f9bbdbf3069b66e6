//! The two tries of the LZ78 family.
//!
//! * [`CharTrie`]: the dictionary while it is being built. Training walks
//!   Unicode characters (every entry is a whole-character string), so a child
//!   is found by `(node, char)`. Children live in one hash map keyed by the
//!   packed pair, which also makes evicting a leaf O(1); the root's ASCII
//!   children, which start almost every phrase, sit in a dense table.
//! * [`ByteTrie`]: a static double-array trie over UTF-8 bytes for greedy
//!   longest-match encoding and for the usage counts of the pruning
//!   strategies. A transition is `t = base[s] + byte; ok iff check[t] == s`:
//!   two array reads and no branches on fan-out, and the three fields of a
//!   state share one 12-byte slot, so a walk touches about one cache line per
//!   byte. Walking bytes is the same as walking characters on valid text,
//!   because every entry is a whole-character string, and it handles any
//!   byte: a byte that starts no match becomes its byte-fallback id.

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};

pub const NONE: u32 = u32::MAX;

// ---------------------------------------------------------------------------
// CharTrie
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct CharNode {
    /// Parent node index (0 = root); meaningless for the root itself.
    pub parent: u32,
    pub ch: char,
    pub children: u32,
    /// Phrase references (frequency_gated).
    pub refs: u64,
    /// Creation order: codes are assigned in this order, so parents precede children.
    pub seq: u64,
    pub alive: bool,
}

/// A character trie with slot reuse. Node 0 is the root.
#[derive(Clone, Debug)]
pub struct CharTrie {
    pub nodes: Vec<CharNode>,
    map: FxHashMap<u64, u32>,
    root_ascii: [u32; 128],
    free: Vec<u32>,
    live: usize,
    next_seq: u64,
}

#[inline(always)]
fn key(node: u32, c: char) -> u64 {
    ((node as u64) << 21) | c as u64
}

impl Default for CharTrie {
    fn default() -> Self {
        Self::new()
    }
}

impl CharTrie {
    pub fn new() -> Self {
        let root = CharNode { parent: 0, ch: '\0', children: 0, refs: 0, seq: 0, alive: true };
        CharTrie {
            nodes: vec![root],
            map: FxHashMap::default(),
            root_ascii: [NONE; 128],
            free: Vec::new(),
            live: 0,
            next_seq: 1,
        }
    }

    /// Number of live entries (the root excluded).
    #[inline]
    pub fn len(&self) -> usize {
        self.live
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    #[inline(always)]
    pub fn child(&self, node: u32, c: char) -> Option<u32> {
        if node == 0 && (c as u32) < 128 {
            let x = self.root_ascii[c as usize];
            return if x == NONE { None } else { Some(x) };
        }
        self.map.get(&key(node, c)).copied()
    }

    /// Add the entry `(parent, c)`; the caller knows it does not exist.
    pub fn add(&mut self, parent: u32, c: char) -> u32 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.add_with_seq(parent, c, seq)
    }

    /// Add `(parent, c)` with a given creation order (restoring an evicted leaf).
    pub fn add_with_seq(&mut self, parent: u32, c: char, seq: u64) -> u32 {
        let node = CharNode { parent, ch: c, children: 0, refs: 0, seq, alive: true };
        let id = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        if parent == 0 && (c as u32) < 128 {
            self.root_ascii[c as usize] = id;
        } else {
            self.map.insert(key(parent, c), id);
        }
        self.nodes[parent as usize].children += 1;
        self.live += 1;
        id
    }

    /// Remove a leaf; its slot is reused by later additions.
    pub fn remove_leaf(&mut self, id: u32) {
        let n = &self.nodes[id as usize];
        debug_assert!(n.alive && n.children == 0 && id != 0);
        let (parent, c) = (n.parent, n.ch);
        if parent == 0 && (c as u32) < 128 {
            self.root_ascii[c as usize] = NONE;
        } else {
            self.map.remove(&key(parent, c));
        }
        self.nodes[parent as usize].children -= 1;
        self.nodes[id as usize].alive = false;
        self.free.push(id);
        self.live -= 1;
    }

    /// Live node indices in creation order (parents before children).
    pub fn live_in_order(&self) -> Vec<u32> {
        let mut v: Vec<u32> = (1..self.nodes.len() as u32).filter(|&i| self.nodes[i as usize].alive).collect();
        v.sort_unstable_by_key(|&i| self.nodes[i as usize].seq);
        v
    }
}

// ---------------------------------------------------------------------------
// ByteTrie (double array)
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Slot {
    base: u32,
    check: u32,
    out: u32,
}

const FREE: Slot = Slot { base: 0, check: NONE, out: NONE };

/// A static byte trie with an output id on some states; greedy longest match.
#[derive(Clone, Debug)]
pub struct ByteTrie {
    slots: Vec<Slot>,
    /// id -> state holding it (NONE if the id has no state)
    state_of: Vec<u32>,
    /// number of states (root included) in use
    states: usize,
}

/// Free slots of the double array under construction, as a doubly linked
/// list in slot order (`NONE`-terminated), growing on demand.
struct FreeList {
    next: Vec<u32>,
    prev: Vec<u32>,
    free: Vec<bool>,
    /// still in the search list (a free slot that failed too many searches
    /// is dropped from it and stays a hole, as double-array builders do;
    /// without this, fragmented holes make the build quadratic)
    linked: Vec<bool>,
    fails: Vec<u8>,
    head: u32,
    tail: u32,
}

impl FreeList {
    fn new(n: usize) -> Self {
        let mut f = FreeList {
            next: Vec::new(),
            prev: Vec::new(),
            free: Vec::new(),
            linked: Vec::new(),
            fails: Vec::new(),
            head: NONE,
            tail: NONE,
        };
        f.ensure(n);
        f
    }

    fn len(&self) -> usize {
        self.free.len()
    }

    /// Grow so that slots `0..n` exist (new slots are free).
    fn ensure(&mut self, n: usize) {
        while self.free.len() < n {
            let i = self.free.len() as u32;
            self.free.push(true);
            self.linked.push(true);
            self.fails.push(0);
            self.next.push(NONE);
            self.prev.push(self.tail);
            if self.tail == NONE {
                self.head = i;
            } else {
                self.next[self.tail as usize] = i;
            }
            self.tail = i;
        }
    }

    fn is_free(&self, i: usize) -> bool {
        self.free[i]
    }

    fn first(&mut self) -> usize {
        if self.head == NONE {
            self.ensure(self.free.len() + 256);
        }
        self.head as usize
    }

    /// The next free slot after `i` (growing if needed).
    fn next(&mut self, i: usize) -> usize {
        let mut j = if self.linked[i] { self.next[i] } else { NONE };
        if j == NONE {
            j = self.next_free_from(i + 1) as u32;
        }
        j as usize
    }

    /// The first free slot at or after `i` (growing if needed).
    fn next_free_from(&mut self, i: usize) -> usize {
        self.ensure(i + 1);
        let mut j = i;
        while j < self.free.len() && !self.free[j] {
            j += 1;
        }
        if j == self.free.len() {
            self.ensure(j + 256);
        }
        j
    }

    fn take(&mut self, i: usize) {
        self.ensure(i + 1);
        debug_assert!(self.free[i]);
        self.free[i] = false;
        self.unlink(i);
    }

    /// A search starting at free slot `i` failed.
    fn failed(&mut self, i: usize) {
        self.fails[i] = self.fails[i].saturating_add(1);
        if self.fails[i] >= 16 && self.linked[i] && self.next[i] != NONE {
            self.unlink(i);
        }
    }

    fn unlink(&mut self, i: usize) {
        if !self.linked[i] {
            return;
        }
        self.linked[i] = false;
        let (p, n) = (self.prev[i], self.next[i]);
        if p == NONE {
            self.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NONE {
            self.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
    }
}

/// A plain pointer trie used only while building the double array.
struct Build {
    children: Vec<Vec<(u8, u32)>>,
    out: Vec<u32>,
}

impl ByteTrie {
    /// Build from `(pattern bytes, id)` pairs. Patterns must be non-empty and
    /// distinct; ids must be distinct and not [`NONE`].
    pub fn build<'a>(items: impl IntoIterator<Item = (&'a [u8], u32)>) -> Result<Self> {
        let mut b = Build { children: vec![Vec::new()], out: vec![NONE] };
        let mut max_id: i64 = -1;
        for (pat, id) in items {
            if pat.is_empty() {
                return Err(Error::Invalid(format!("dictionary entry {id} has an empty pattern")));
            }
            if id == NONE {
                return Err(Error::Invalid("dictionary id out of range".into()));
            }
            let mut s = 0u32;
            for &byte in pat {
                let ch = &b.children[s as usize];
                s = match ch.iter().find(|(x, _)| *x == byte) {
                    Some(&(_, t)) => t,
                    None => {
                        let t = b.out.len() as u32;
                        b.children.push(Vec::new());
                        b.out.push(NONE);
                        b.children[s as usize].push((byte, t));
                        t
                    }
                };
            }
            if b.out[s as usize] != NONE {
                return Err(Error::Invalid(format!(
                    "dictionary entries {} and {id} have the same pattern {:?}",
                    b.out[s as usize],
                    String::from_utf8_lossy(pat)
                )));
            }
            b.out[s as usize] = id;
            max_id = max_id.max(id as i64);
        }
        let mut state_of = vec![NONE; (max_id + 1) as usize];
        // Place states breadth first so that the states of short prefixes,
        // which every walk visits, are packed together near the start. Free
        // slots form a linked list, so finding a base skips used slots
        // instead of scanning them (without it the build is quadratic).
        let n = b.out.len();
        let mut slots: Vec<Slot> = vec![FREE; n + 256];
        let mut fl = FreeList::new(n + 256);
        fl.take(0);
        slots[0].out = b.out[0];
        let mut queue: std::collections::VecDeque<(u32, u32)> = std::collections::VecDeque::new();
        queue.push_back((0, 0));
        let mut states = 1usize;
        while let Some((pn, s)) = queue.pop_front() {
            let mut labels = std::mem::take(&mut b.children[pn as usize]);
            if labels.is_empty() {
                continue;
            }
            labels.sort_unstable_by_key(|x| x.0);
            let lo = labels[0].0 as usize;
            let hi = labels[labels.len() - 1].0 as usize;
            let mut p = fl.first();
            let base = loop {
                if p < lo + 1 {
                    // too low for this node's smallest label (base + lo would be
                    // below p's own position); count it as a failure so that
                    // low holes leave the search list
                    let q = fl.next(p);
                    fl.failed(p);
                    p = q;
                    continue;
                }
                let base = p - lo;
                fl.ensure(base + hi + 1);
                if labels.iter().all(|&(l, _)| fl.is_free(base + l as usize)) {
                    break base;
                }
                let q = fl.next(p);
                fl.failed(p);
                p = q;
            };
            if slots.len() < fl.len() {
                slots.resize(fl.len(), FREE);
            }
            slots[s as usize].base = base as u32;
            for &(l, child) in &labels {
                let t = base + l as usize;
                fl.take(t);
                slots[t].check = s;
                slots[t].out = b.out[child as usize];
                if b.out[child as usize] != NONE {
                    state_of[b.out[child as usize] as usize] = t as u32;
                }
                states += 1;
                queue.push_back((child, t as u32));
            }
        }
        if slots.len() < fl.len() {
            slots.resize(fl.len(), FREE);
        }
        let used: Vec<bool> = (0..slots.len()).map(|i| !fl.is_free(i)).collect();
        // Trim trailing free slots, then pad so that `base + byte` is in
        // bounds for every state (a leaf's base is 0): the walk can then index
        // without a bounds check (see `encode_into`).
        let last_used = used.iter().rposition(|&u| u).unwrap_or(0);
        slots.truncate(last_used + 1);
        let max_base = slots.iter().map(|x| x.base as usize).max().unwrap_or(0);
        slots.resize(slots.len().max(max_base + 256), FREE);
        slots.shrink_to_fit();
        Ok(ByteTrie { slots, state_of, states })
    }

    /// States in use, the root included.
    pub fn states(&self) -> usize {
        self.states
    }

    /// Slots of the double array (states plus holes).
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    #[inline(always)]
    fn step(&self, s: u32, byte: u8) -> u32 {
        let t = self.slots[s as usize].base.wrapping_add(byte as u32) as usize;
        match self.slots.get(t) {
            Some(x) if x.check == s => t as u32,
            _ => NONE,
        }
    }

    /// Turn an id's output on or off (the pruning rounds of smart_prune).
    pub fn set_output(&mut self, id: u32, on: bool) {
        let s = self.state_of[id as usize];
        if s != NONE {
            self.slots[s as usize].out = if on { id } else { NONE };
        }
    }

    /// The longest output match at the start of `s` whose id is not
    /// `exclude`: `(id, length)`.
    #[inline(always)]
    pub fn longest(&self, s: &[u8], exclude: u32) -> Option<(u32, usize)> {
        let mut state = 0u32;
        let mut best: Option<(u32, usize)> = None;
        for (i, &byte) in s.iter().enumerate() {
            state = self.step(state, byte);
            if state == NONE {
                break;
            }
            let o = self.slots[state as usize].out;
            if o != NONE && o != exclude {
                best = Some((o, i + 1));
            }
        }
        best
    }

    /// Every output match at the start of `s`, shortest first: `f(length, id)`
    /// (a common-prefix search; the Unigram lattice of `crate::pipeline`).
    #[inline]
    pub fn prefixes(&self, s: &[u8], mut f: impl FnMut(usize, u32)) {
        let mut state = 0u32;
        for (i, &byte) in s.iter().enumerate() {
            state = self.step(state, byte);
            if state == NONE {
                return;
            }
            let o = self.slots[state as usize].out;
            if o != NONE {
                f(i + 1, o);
            }
        }
    }

    /// Whether some entry starts with `s`.
    pub fn starts(&self, s: &[u8]) -> bool {
        let mut state = 0u32;
        for &byte in s {
            state = self.step(state, byte);
            if state == NONE {
                return false;
            }
        }
        true
    }

    /// The id of exactly `s`, if it is an entry.
    pub fn get(&self, s: &[u8]) -> Option<u32> {
        let mut state = 0u32;
        for &byte in s {
            state = self.step(state, byte);
            if state == NONE {
                return None;
            }
        }
        let o = self.slots[state as usize].out;
        (o != NONE && !s.is_empty()).then_some(o)
    }

    /// Greedy longest match over `s`; a byte that starts no match is emitted
    /// as `fallback_base + byte`.
    #[inline]
    pub fn encode_into(&self, s: &[u8], fallback_base: u32, out: &mut Vec<u32>) {
        let slots = &self.slots[..];
        let n = s.len();
        let mut i = 0;
        while i < n {
            let mut state = 0u32;
            let mut best = NONE;
            let mut best_end = i;
            let mut j = i;
            while j < n {
                // SAFETY: `state` is a state index (< slots.len()), and build()
                // pads `slots` to at least max(base) + 256 entries, so
                // `base + byte` is always in bounds.
                let x = unsafe {
                    let t = slots.get_unchecked(state as usize).base as usize + s[j] as usize;
                    debug_assert!(t < slots.len());
                    let x = slots.get_unchecked(t);
                    if x.check != state {
                        break;
                    }
                    state = t as u32;
                    x
                };
                j += 1;
                if x.out != NONE {
                    best = x.out;
                    best_end = j;
                }
            }
            if best == NONE {
                out.push(fallback_base + s[i] as u32);
                i += 1;
            } else {
                out.push(best);
                i = best_end;
            }
        }
    }

    /// Greedy longest match over `s`, calling `f(start, end, id)` per token
    /// (`id == NONE` for a byte fallback of one byte). Ids equal to `exclude`
    /// are treated as absent.
    #[inline]
    pub fn parse(&self, s: &[u8], exclude: u32, mut f: impl FnMut(usize, usize, u32)) {
        let mut i = 0;
        while i < s.len() {
            match self.longest(&s[i..], exclude) {
                Some((id, len)) => {
                    f(i, i + len, id);
                    i += len;
                }
                None => {
                    f(i, i + 1, NONE);
                    i += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(pats: &[String], s: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < s.len() {
            let mut best: Option<(u32, usize)> = None;
            for (k, p) in pats.iter().enumerate() {
                let p = p.as_bytes();
                if s[i..].starts_with(p) && best.is_none_or(|(_, l)| p.len() > l) {
                    best = Some((k as u32 + 1, p.len()));
                }
            }
            match best {
                Some((id, l)) => {
                    out.push(id);
                    i += l;
                }
                None => {
                    out.push(1000 + s[i] as u32);
                    i += 1;
                }
            }
        }
        out
    }

    #[test]
    fn seed_example() {
        let pats = ["h", "e", "he", "hel", "hell", "hello"];
        let t = ByteTrie::build(pats.iter().enumerate().map(|(i, p)| (p.as_bytes(), i as u32 + 1))).unwrap();
        let mut out = Vec::new();
        t.encode_into(b"hello", 7, &mut out);
        assert_eq!(out, vec![6]);
        out.clear();
        t.encode_into(b"hex", 7, &mut out);
        assert_eq!(out, vec![3, 127]);
    }

    #[test]
    fn duplicate_pattern() {
        assert!(ByteTrie::build([(&b"ab"[..], 1), (&b"ab"[..], 2)]).is_err());
    }

    #[test]
    fn char_trie_evict() {
        let mut t = CharTrie::new();
        let a = t.add(0, 'a');
        let b = t.add(a, 'b');
        let z = t.add(0, 'é');
        assert_eq!(t.child(0, 'a'), Some(a));
        assert_eq!(t.child(a, 'b'), Some(b));
        assert_eq!(t.child(0, 'é'), Some(z));
        t.remove_leaf(b);
        assert_eq!(t.child(a, 'b'), None);
        assert_eq!(t.nodes[a as usize].children, 0);
        let c = t.add(a, 'c');
        assert_eq!(c, b); // slot reused
        assert_eq!(t.live_in_order(), vec![a, z, c]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn matches_naive(pats in prop::collection::btree_set("[abcé]{1,5}", 1..30), s in "[abcéd]{0,60}") {
            let pats: Vec<String> = pats.into_iter().collect();
            let t = ByteTrie::build(pats.iter().enumerate().map(|(i, p)| (p.as_bytes(), i as u32 + 1))).unwrap();
            let mut out = Vec::new();
            t.encode_into(s.as_bytes(), 1000, &mut out);
            prop_assert_eq!(out, naive(&pats, s.as_bytes()));
        }
    }
}

#[cfg(test)]
mod build_speed {
    use super::*;

    /// A large prefix-closed dictionary builds in well under a second
    /// (the double-array placement must not be quadratic).
    #[test]
    fn large_build_is_fast() {
        let mut pats: Vec<String> = Vec::new();
        let mut x: u64 = 12345;
        let mut set = std::collections::HashSet::new();
        while pats.len() < 150_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let len = 1 + (x >> 60) as usize % 8;
            let s: String = (0..len).map(|k| (b'a' + ((x >> (k * 5)) % 26) as u8) as char).collect();
            for k in 1..=s.len() {
                if set.insert(s[..k].to_string()) {
                    pats.push(s[..k].to_string());
                }
            }
        }
        let t = std::time::Instant::now();
        let trie = ByteTrie::build(pats.iter().enumerate().map(|(i, p)| (p.as_bytes(), i as u32 + 1))).unwrap();
        let dt = t.elapsed();
        assert!(trie.slots() < trie.states() * 2 + 256, "{} slots for {} states", trie.slots(), trie.states());
        assert!(dt.as_secs_f64() < 5.0, "build took {dt:?}");
        eprintln!("built {} states in {dt:?}, {} slots", trie.states(), trie.slots());
    }
}
