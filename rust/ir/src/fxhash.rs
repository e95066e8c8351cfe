//! A small fast hasher for tables keyed by names and types (the parser's names, the
//! builder's interned types, the Python bindings' caches): keys are short and chosen by
//! the program, not by an adversary, so SipHash's protection is not needed and its cost
//! is.
//!
//! ```
//! use ferrax_ir::fxhash::FxBuild;
//! use ferrax_ir::{AbstractValue, DType};
//! use std::collections::HashMap;
//! let mut ids: HashMap<AbstractValue, usize, FxBuild> = HashMap::default();
//! ids.insert(AbstractValue::array(DType::F32, &[3])?, 0);
//! assert_eq!(ids[&AbstractValue::array(DType::F32, &[3])?], 0);
//! # Ok::<(), ferrax_ir::ShapeError>(())
//! ```

use std::hash::{BuildHasherDefault, Hasher};

/// The multiply-rotate hash of rustc's `FxHasher`, one word at a time.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

const K: u64 = 0x517c_c1b7_2722_0a95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, b: u8) {
        self.add(u64::from(b));
    }
    #[inline]
    fn write_u32(&mut self, w: u32) {
        self.add(u64::from(w));
    }
    #[inline]
    fn write_u64(&mut self, w: u64) {
        self.add(w);
    }
    #[inline]
    fn write_i64(&mut self, w: i64) {
        self.add(w as u64);
    }
    #[inline]
    fn write_usize(&mut self, w: usize) {
        self.add(w as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Builds [`FxHasher`]s, for `HashMap<K, V, FxBuild>`.
pub type FxBuild = BuildHasherDefault<FxHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_table_keyed_by_types_and_names() {
        let mut m: HashMap<(Vec<i64>, &str), usize, FxBuild> = HashMap::default();
        for i in 0..1000 {
            m.insert(
                (vec![i, i + 1], if i % 2 == 0 { "even" } else { "odd" }),
                i as usize,
            );
        }
        assert_eq!(m.len(), 1000);
        assert_eq!(m[&(vec![41, 42], "odd")], 41);
        let h = |x: &[u8]| {
            let mut f = FxHasher::default();
            f.write(x);
            f.finish()
        };
        assert_ne!(h(b"abcdefgh1"), h(b"abcdefgh2"));
    }
}
