//! Running statistics of a fuzz target, printed to stderr as it runs (as Cranelift's
//! fuzzgen does): executions, the share of inputs that gave a checked case, and soft
//! findings (generator rejections; hard findings panic).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one fuzz target, for a `static`.
#[derive(Debug)]
pub struct Stats {
    name: &'static str,
    every: u64,
    execs: AtomicU64,
    valid: AtomicU64,
    findings: AtomicU64,
}

impl Stats {
    /// Counters for the target `name`, printed every `every` executions.
    pub const fn new(name: &'static str, every: u64) -> Stats {
        Stats {
            name,
            every,
            execs: AtomicU64::new(0),
            valid: AtomicU64::new(0),
            findings: AtomicU64::new(0),
        }
    }

    /// Records one execution: whether its input gave a checked case, and how many soft
    /// findings it had; prints the counters every `every` executions (and at powers of
    /// two from 64).
    pub fn record(&self, valid: bool, findings: u64) {
        let n = self.execs.fetch_add(1, Ordering::Relaxed) + 1;
        if valid {
            self.valid.fetch_add(1, Ordering::Relaxed);
        }
        if findings > 0 {
            self.findings.fetch_add(findings, Ordering::Relaxed);
        }
        // Powers of two first, so slow targets report early too.
        if (n.is_power_of_two() && n >= 64) || (self.every > 0 && n % self.every == 0) {
            eprintln!("{}", self.summary());
        }
    }

    /// `name: N execs, V valid (P%), F findings`.
    pub fn summary(&self) -> String {
        let n = self.execs.load(Ordering::Relaxed);
        let v = self.valid.load(Ordering::Relaxed);
        let f = self.findings.load(Ordering::Relaxed);
        let share = if n == 0 {
            0.0
        } else {
            100.0 * v as f64 / n as f64
        };
        format!(
            "== {}: {n} execs, {v} valid ({share:.1}%), {f} findings",
            self.name
        )
    }
}
