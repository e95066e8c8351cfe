//! A reference evaluator over host arrays (placeholder until it lands).
