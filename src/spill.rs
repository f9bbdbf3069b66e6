//! Sorted runs of (piece, count) on disk: how a [`crate::wordcount::WordCounter`]
//! counts a corpus whose unique pieces do not fit its memory budget.
//!
//! When the counter's table passes its limit, its entries are sorted by bytes
//! and written to a run file, and the table starts empty. At the end the runs
//! are merged (a k-way merge of sorted streams, at most [`FAN_IN`] files open
//! at once: more runs are first merged into fewer), summing the counts of a
//! piece met in several runs, so the counts are exact whatever the corpus size.
//!
//! A run is written as `run-N.partial` and renamed to `run-N` once its trailer
//! (the number of entries) is written; a reader checks the header, every
//! length against the bytes left in the file, and the trailer. The directory is
//! the counter's own (`tokenforge-spill-<pid>-<n>` under the chosen temporary
//! directory) and is removed when the counter goes (dropped, interrupted,
//! finished), so an interrupted count leaves nothing that looks complete; a
//! killed process leaves its directory, whose name says what it is.
//!
//! Not handled: compression of the runs, and reusing runs of an earlier process.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// Runs merged at once (open files and read buffers: `FAN_IN * BUF` bytes).
pub const FAN_IN: usize = 64;
const BUF: usize = 1 << 16;
const MAGIC: &[u8; 8] = b"TFRUN\x001\n";

fn io(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::System(format!("{what} {}: {e}", path.display()))
}

/// The spill directory of one counter, removed with it.
pub struct SpillDir {
    dir: PathBuf,
    next: usize,
    /// Complete runs, in the order written.
    pub runs: Vec<PathBuf>,
}

impl SpillDir {
    /// A new, empty directory of this process's under `parent`.
    pub fn new(parent: &Path) -> Result<Self> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        loop {
            let n = SEQ.fetch_add(1, Ordering::Relaxed);
            let dir = parent.join(format!("tokenforge-spill-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(SpillDir { dir, next: 0, runs: Vec::new() }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io("cannot create the spill directory", &dir, e)),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Write `items` (sorted by bytes, each piece once) as a new run.
    pub fn write_run<'a>(&mut self, items: impl ExactSizeIterator<Item = (&'a [u8], u64)>) -> Result<()> {
        let path = self.write(|w| {
            let mut n = 0u64;
            for (k, v) in items {
                w.entry(k, v)?;
                n += 1;
            }
            Ok(n)
        })?;
        self.runs.push(path);
        Ok(())
    }

    /// A run written by `fill`, which returns the entries it wrote; its final path.
    fn write(&mut self, fill: impl FnOnce(&mut RunWriter) -> Result<u64>) -> Result<PathBuf> {
        let path = self.dir.join(format!("run-{}", self.next));
        self.next += 1;
        let partial = path.with_extension("partial");
        let f = File::create(&partial).map_err(|e| io("cannot write the spill run", &partial, e))?;
        let mut w = RunWriter { out: BufWriter::with_capacity(BUF, f), path: partial.clone() };
        w.put(MAGIC)?;
        let n = fill(&mut w)?;
        w.put(b"END")?;
        w.put(&n.to_le_bytes())?;
        w.out.flush().map_err(|e| io("cannot write the spill run", &partial, e))?;
        drop(w);
        std::fs::rename(&partial, &path).map_err(|e| io("cannot finish the spill run", &path, e))?;
        Ok(path)
    }

    /// Merge the runs until at most [`FAN_IN`] are left (each merge sums the
    /// counts of equal pieces, so the runs stay sorted with unique pieces).
    pub fn reduce(&mut self) -> Result<()> {
        while self.runs.len() > FAN_IN {
            let group: Vec<PathBuf> = self.runs.drain(..FAN_IN).collect();
            let mut merge = Merge::open(&group)?;
            let path = self.write(|w| {
                let mut n = 0;
                while let Some((k, v)) = merge.next()? {
                    w.entry(&k, v)?;
                    n += 1;
                }
                Ok(n)
            })?;
            for p in &group {
                let _ = std::fs::remove_file(p);
            }
            self.runs.push(path);
        }
        Ok(())
    }

    /// The merged stream of every run (call [`Self::reduce`] first).
    pub fn merge(&self) -> Result<Merge> {
        Merge::open(&self.runs)
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

struct RunWriter {
    out: BufWriter<File>,
    path: PathBuf,
}

impl RunWriter {
    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.out.write_all(b).map_err(|e| io("cannot write the spill run", &self.path, e))
    }

    fn varint(&mut self, mut v: u64) -> Result<()> {
        let mut buf = [0u8; 10];
        let mut n = 0;
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                buf[n] = b;
                n += 1;
                break;
            }
            buf[n] = b | 0x80;
            n += 1;
        }
        self.put(&buf[..n])
    }

    fn entry(&mut self, k: &[u8], v: u64) -> Result<()> {
        self.varint(k.len() as u64)?;
        self.put(k)?;
        self.varint(v)
    }
}

/// One run, read back in order.
struct RunReader {
    r: BufReader<File>,
    path: PathBuf,
    /// Entries left (from the trailer).
    left: u64,
    /// Bytes left before the trailer: no length read may pass it.
    bytes_left: u64,
}

impl RunReader {
    fn open(path: &Path) -> Result<Self> {
        let bad = |m: &str| Error::System(format!("spill run {} is damaged: {m}", path.display()));
        let mut f = File::open(path).map_err(|e| io("cannot read the spill run", path, e))?;
        let size = f.metadata().map_err(|e| io("cannot read the spill run", path, e))?.len();
        if size < (MAGIC.len() + 11) as u64 {
            return Err(bad("too short"));
        }
        use std::io::{Seek, SeekFrom};
        let mut trailer = [0u8; 11];
        f.seek(SeekFrom::Start(size - 11))
            .and_then(|_| f.read_exact(&mut trailer))
            .map_err(|e| io("cannot read", path, e))?;
        if &trailer[..3] != b"END" {
            return Err(bad("no trailer (an unfinished run)"));
        }
        let left = u64::from_le_bytes(trailer[3..].try_into().unwrap());
        let mut magic = [0u8; 8];
        f.seek(SeekFrom::Start(0)).and_then(|_| f.read_exact(&mut magic)).map_err(|e| io("cannot read", path, e))?;
        if &magic != MAGIC {
            return Err(bad("not a spill run"));
        }
        let bytes_left = size - 11 - MAGIC.len() as u64;
        // every entry takes at least 2 bytes: the trailer's count is bounded by the file
        if left > bytes_left / 2 {
            return Err(bad("more entries than bytes"));
        }
        Ok(RunReader { r: BufReader::with_capacity(BUF, f), path: path.to_path_buf(), left, bytes_left })
    }

    fn byte(&mut self) -> Result<u8> {
        if self.bytes_left == 0 {
            return Err(Error::System(format!(
                "spill run {} is damaged: an entry passes its end",
                self.path.display()
            )));
        }
        let mut b = [0u8];
        self.r.read_exact(&mut b).map_err(|e| io("cannot read the spill run", &self.path, e))?;
        self.bytes_left -= 1;
        Ok(b[0])
    }

    fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Error::System(format!("spill run {} is damaged: a varint of more than 64 bits", self.path.display())))
    }

    /// The next entry into `key` (false at the end).
    fn next_into(&mut self, key: &mut Vec<u8>) -> Result<Option<u64>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let n = self.varint()?;
        if n > self.bytes_left {
            return Err(Error::System(format!("spill run {} is damaged: a piece passes its end", self.path.display())));
        }
        key.clear();
        key.resize(n as usize, 0);
        self.r.read_exact(key).map_err(|e| io("cannot read the spill run", &self.path, e))?;
        self.bytes_left -= n;
        Ok(Some(self.varint()?))
    }
}

/// The k-way merge of sorted runs: each piece once, its counts summed, in byte order.
pub struct Merge {
    readers: Vec<RunReader>,
    keys: Vec<Vec<u8>>,
    counts: Vec<u64>,
    heap: BinaryHeap<Reverse<(Vec<u8>, usize)>>,
}

impl Merge {
    fn open(paths: &[PathBuf]) -> Result<Self> {
        let mut m = Merge { readers: Vec::new(), keys: Vec::new(), counts: Vec::new(), heap: BinaryHeap::new() };
        for (i, p) in paths.iter().enumerate() {
            m.readers.push(RunReader::open(p)?);
            m.keys.push(Vec::new());
            m.counts.push(0);
            m.advance(i)?;
        }
        Ok(m)
    }

    fn advance(&mut self, i: usize) -> Result<()> {
        if let Some(c) = self.readers[i].next_into(&mut self.keys[i])? {
            self.counts[i] = c;
            self.heap.push(Reverse((std::mem::take(&mut self.keys[i]), i)));
        }
        Ok(())
    }

    /// The next piece and its total count.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<(Vec<u8>, u64)>> {
        let Some(Reverse((key, i))) = self.heap.pop() else { return Ok(None) };
        let mut total = self.counts[i];
        self.advance(i)?;
        while let Some(Reverse((k, _))) = self.heap.peek() {
            if *k != key {
                break;
            }
            let Some(Reverse((_, j))) = self.heap.pop() else { break };
            total = total.checked_add(self.counts[j]).ok_or_else(|| Error::invalid("a piece count passes 2^64"))?;
            self.advance(j)?;
        }
        Ok(Some((key, total)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_with_summed_counts() {
        let parent = std::env::temp_dir();
        let mut d = SpillDir::new(&parent).unwrap();
        let dir = d.path().to_path_buf();
        // 150 runs (more than FAN_IN): piece i%7 and piece "r{run}"
        let mut want = std::collections::BTreeMap::<Vec<u8>, u64>::new();
        for r in 0..150u64 {
            let mut items: Vec<(Vec<u8>, u64)> = (0..7u64).map(|i| (vec![b'a' + i as u8], r + i)).collect();
            items.push((format!("r{r:03}").into_bytes(), 1));
            items.retain(|x| x.1 > 0);
            items.sort();
            for (k, v) in &items {
                *want.entry(k.clone()).or_insert(0) += v;
            }
            d.write_run(items.iter().map(|(k, v)| (&k[..], *v)).collect::<Vec<_>>().into_iter()).unwrap();
        }
        d.reduce().unwrap();
        assert!(d.runs.len() <= FAN_IN);
        let mut m = d.merge().unwrap();
        let mut got = Vec::new();
        while let Some(x) = m.next().unwrap() {
            got.push(x);
        }
        assert_eq!(got, want.into_iter().collect::<Vec<_>>());
        // a run without its trailer is refused
        let p = dir.join("bad");
        std::fs::write(&p, b"TFRUN\x001\n\x01a\x01").unwrap();
        assert!(RunReader::open(&p).is_err());
        drop(m);
        drop(d);
        assert!(!dir.exists());
    }
}
