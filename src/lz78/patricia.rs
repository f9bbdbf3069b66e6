//! Patricia tries: the `compressed` form of a dictionary.
//!
//! The character trie of a dictionary has one node per distinct prefix of its
//! patterns. A node that is not an output and has exactly one child carries
//! no information of its own, so a chain of them collapses into its child's
//! edge, whose label becomes a multi-character string. What remains is the
//! root, every output node, and every branching node.
//!
//! Greedy longest-match on the Patricia trie gives exactly the ids of the
//! plain trie: a match can only end at an output node, and every output node
//! survives the collapse. A property test checks it.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

pub const NO_OUTPUT: u32 = u32::MAX;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PNode {
    /// Parent node index (0 = root); the root's parent is itself.
    pub parent: u32,
    /// Edge label from the parent (empty for the root).
    pub label: String,
    /// Output id, or [`NO_OUTPUT`].
    pub output: u32,
    /// The full string of this node.
    pub pattern: String,
    /// Children, sorted by the first character of their labels.
    pub children: Vec<u32>,
}

#[derive(Clone, Debug)]
pub struct Patricia {
    /// Node 0 is the root; the others are numbered depth first, children in
    /// character order.
    pub nodes: Vec<PNode>,
    /// Nodes of the uncompressed character trie (root excluded).
    pub trie_nodes: usize,
}

impl Patricia {
    /// Build from `(pattern, output id)`; `NO_OUTPUT` marks a prefix-only
    /// node that is kept only for structure (it still collapses when it has
    /// one child, since it cannot be emitted).
    pub fn build<'a>(items: impl IntoIterator<Item = (&'a str, u32)>) -> Result<Self> {
        // character trie: children in a BTreeMap so the numbering is canonical
        struct T {
            ch: BTreeMap<char, usize>,
            out: u32,
        }
        let mut t: Vec<T> = vec![T { ch: BTreeMap::new(), out: NO_OUTPUT }];
        for (pat, id) in items {
            if pat.is_empty() {
                return Err(Error::Invalid("a dictionary entry has an empty pattern".into()));
            }
            let mut s = 0usize;
            for c in pat.chars() {
                s = match t[s].ch.get(&c) {
                    Some(&x) => x,
                    None => {
                        t.push(T { ch: BTreeMap::new(), out: NO_OUTPUT });
                        let x = t.len() - 1;
                        t[s].ch.insert(c, x);
                        x
                    }
                };
            }
            if id != NO_OUTPUT {
                if t[s].out != NO_OUTPUT && t[s].out != id {
                    return Err(Error::Invalid(format!("outputs {} and {id} have the same pattern {pat:?}", t[s].out)));
                }
                t[s].out = id;
            }
        }
        let trie_nodes = t.len() - 1;
        let mut nodes = vec![PNode {
            parent: 0,
            label: String::new(),
            output: NO_OUTPUT,
            pattern: String::new(),
            children: Vec::new(),
        }];
        // iterative DFS: (trie node, patricia parent, pattern so far of the parent)
        let mut stack: Vec<(usize, u32)> = Vec::new();
        // push root's children in reverse so they pop in order
        for (_, &c) in t[0].ch.iter().rev() {
            stack.push((c, 0));
        }
        // the character each trie node was reached by
        let mut via: Vec<char> = vec!['\0'; t.len()];
        for node in &t {
            for (&c, &x) in &node.ch {
                via[x] = c;
            }
        }
        while let Some((mut s, parent)) = stack.pop() {
            let mut label = String::new();
            label.push(via[s]);
            // follow the chain of non-output single-child nodes
            while t[s].out == NO_OUTPUT && t[s].ch.len() == 1 {
                let (&c, &x) = t[s].ch.iter().next().unwrap();
                label.push(c);
                s = x;
            }
            let mut pattern = nodes[parent as usize].pattern.clone();
            pattern.push_str(&label);
            let idx = nodes.len() as u32;
            nodes.push(PNode { parent, label, output: t[s].out, pattern, children: Vec::new() });
            nodes[parent as usize].children.push(idx);
            for (_, &c) in t[s].ch.iter().rev() {
                stack.push((c, idx));
            }
        }
        Ok(Patricia { nodes, trie_nodes })
    }

    /// Build from an explicit node table (the compressed TSV): `(parent,
    /// label, output)` per node 1.., parents before children.
    pub fn from_rows(rows: &[(u32, String, u32)]) -> Result<Self> {
        let mut nodes = vec![PNode {
            parent: 0,
            label: String::new(),
            output: NO_OUTPUT,
            pattern: String::new(),
            children: Vec::new(),
        }];
        for (i, (parent, label, output)) in rows.iter().enumerate() {
            let idx = i + 1;
            if *parent as usize >= idx {
                return Err(Error::Invalid(format!("node {idx}: parent {parent} does not come before it")));
            }
            if label.is_empty() {
                return Err(Error::Invalid(format!("node {idx}: empty edge label")));
            }
            let first = label.chars().next().unwrap();
            let siblings = &nodes[*parent as usize].children;
            if siblings.iter().any(|&c| nodes[c as usize].label.starts_with(first)) {
                return Err(Error::Invalid(format!("node {idx}: two children of node {parent} start with {first:?}")));
            }
            let mut pattern = nodes[*parent as usize].pattern.clone();
            pattern.push_str(label);
            nodes[*parent as usize].children.push(idx as u32);
            nodes.push(PNode { parent: *parent, label: label.clone(), output: *output, pattern, children: Vec::new() });
        }
        for n in nodes.iter_mut() {
            let mut ch = std::mem::take(&mut n.children);
            ch.sort_by_key(|&c| c);
            n.children = ch;
        }
        let trie_nodes = nodes[1..].iter().map(|n| n.label.chars().count()).sum();
        Ok(Patricia { nodes, trie_nodes })
    }

    /// Nodes without the root.
    pub fn len(&self) -> usize {
        self.nodes.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1
    }

    /// Plain-trie nodes / Patricia nodes (roots excluded).
    pub fn compression_ratio(&self) -> f64 {
        if self.is_empty() {
            1.0
        } else {
            self.trie_nodes as f64 / self.len() as f64
        }
    }

    /// Greedy longest match on the Patricia trie, byte fallback as in
    /// [`super::trie::ByteTrie::encode_into`].
    pub fn encode_into(&self, s: &[u8], fallback_base: u32, out: &mut Vec<u32>) {
        let mut i = 0;
        while i < s.len() {
            let mut node = 0usize;
            let mut j = i;
            let mut best = NO_OUTPUT;
            let mut best_end = i;
            'walk: loop {
                for &c in &self.nodes[node].children {
                    let lab = self.nodes[c as usize].label.as_bytes();
                    if s[j..].starts_with(lab) {
                        node = c as usize;
                        j += lab.len();
                        if self.nodes[node].output != NO_OUTPUT {
                            best = self.nodes[node].output;
                            best_end = j;
                        }
                        continue 'walk;
                    }
                }
                break;
            }
            if best == NO_OUTPUT {
                out.push(fallback_base + s[i] as u32);
                i += 1;
            } else {
                out.push(best);
                i = best_end;
            }
        }
    }

    /// Depth (edges from the root) of every node, root = 0.
    pub fn depths(&self) -> Vec<u32> {
        let mut d = vec![0u32; self.nodes.len()];
        for i in 1..self.nodes.len() {
            d[i] = d[self.nodes[i].parent as usize] + 1;
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lz78::trie::ByteTrie;
    use proptest::prelude::*;

    #[test]
    fn chain_collapses() {
        // outputs only at the ends: h, hello, help
        let p = Patricia::build([("h", 1), ("hello", 2), ("help", 3)]).unwrap();
        // root -> h -> el -> lo, p
        let labels: Vec<&str> = p.nodes[1..].iter().map(|n| n.label.as_str()).collect();
        assert_eq!(labels, vec!["h", "el", "lo", "p"]);
        assert_eq!(p.trie_nodes, 6);
        assert_eq!(p.len(), 4);
        let seed = Patricia::build([("h", 1), ("e", 2), ("he", 3), ("hel", 4), ("hell", 5), ("hello", 6)]).unwrap();
        assert_eq!(seed.len(), 6);
        assert_eq!(seed.compression_ratio(), 1.0);
        let mut out = Vec::new();
        seed.encode_into(b"hex", 7, &mut out);
        assert_eq!(out, vec![3, 127]);
    }

    #[test]
    fn rows_roundtrip() {
        let p = Patricia::build([("ab", 1), ("abcd", 2), ("x", NO_OUTPUT), ("xy", 3), ("xz", 4)]).unwrap();
        let rows: Vec<(u32, String, u32)> =
            p.nodes[1..].iter().map(|n| (n.parent, n.label.clone(), n.output)).collect();
        let q = Patricia::from_rows(&rows).unwrap();
        assert_eq!(p.nodes, q.nodes);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn patricia_equals_plain(pats in prop::collection::btree_map("[abcé]{1,6}", any::<bool>(), 1..40), s in "[abcéd]{0,80}") {
            let items: Vec<(&str, u32)> = pats.iter().enumerate()
                .map(|(i, (p, &o))| (p.as_str(), if o { i as u32 + 1 } else { NO_OUTPUT })).collect();
            let p = Patricia::build(items.iter().copied()).unwrap();
            let t = ByteTrie::build(items.iter().filter(|x| x.1 != NO_OUTPUT).map(|(p, i)| (p.as_bytes(), *i))).unwrap();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            p.encode_into(s.as_bytes(), 1000, &mut a);
            t.encode_into(s.as_bytes(), 1000, &mut b);
            prop_assert_eq!(a, b);
        }
    }
}
