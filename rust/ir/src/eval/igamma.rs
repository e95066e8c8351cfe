//! The regularized incomplete gamma functions `igamma(a, x) = P(a, x)`, `igammac(a, x) =
//! Q(a, x) = 1 - P(a, x)` and `igamma_grad_a(a, x) = dP/da`, in `f64`, by the method
//! XLA and JAX use (so that the values at the edges are theirs): the power series of
//! `P` where `x <= 1` or `x <= a`, the continued fraction of `Q` elsewhere, each carrying
//! its derivative in `a` alongside. Both iterate to `f64` precision (the lowering
//! iterates to the operand dtype's), with the continued fraction capped at 2000 steps as
//! JAX's is and the series at [`SERIES_CAP`] (JAX's has no cap: it always converges
//! where it is used, and the cap only bounds the time a hostile input can take).

use super::special::{digamma, lgamma};

/// The most terms of the series summed (it converges in a few hundred where used).
const SERIES_CAP: usize = 100_000;
/// The most steps of the continued fraction (JAX's bound).
const FRACTION_CAP: u32 = 2000;

/// What a series or continued fraction returns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The function's value.
    Value,
    /// Its derivative in `a`.
    Derivative,
}

/// The series `P(a, x) = ax / a * sum_k x^k / ((a+1)...(a+k))` and its derivative in `a`;
/// `ax` is `x^a e^-x / Gamma(a)`. Nothing is summed unless `enabled`.
fn series(ax: f64, x: f64, a: f64, enabled: bool, mode: Mode) -> f64 {
    let (mut r, mut c, mut ans, mut dc_da, mut dans_da) = (a, 1.0, 1.0, 0.0, 0.0);
    let mut go = enabled;
    let mut steps = 0;
    while go && steps < SERIES_CAP {
        steps += 1;
        r += 1.0;
        dc_da = dc_da * (x / r) - (c * x) / (r * r);
        dans_da += dc_da;
        c *= x / r;
        ans += c;
        go = match mode {
            Mode::Value => c / ans > f64::EPSILON,
            Mode::Derivative => (dc_da / dans_da).abs() > f64::EPSILON,
        };
    }
    match mode {
        Mode::Value => ans * ax / a,
        Mode::Derivative => {
            let dlogax_da = x.ln() - digamma(a + 1.0);
            ax * (ans * dlogax_da + dans_da) / a
        }
    }
}

/// The continued fraction of `Q(a, x) = ax * (1 / (x + 1 - a - ...))` and its
/// derivative in `a`, with the convergents rescaled when they grow past `1 / eps`.
fn fraction(ax: f64, x: f64, a: f64, enabled: bool, mode: Mode) -> f64 {
    let eps = f64::EPSILON;
    let mut y = 1.0 - a;
    let mut z = x + y + 1.0;
    let mut c = 0.0;
    let (mut pkm2, mut qkm2, mut pkm1) = (1.0, x, x + 1.0);
    let mut qkm1 = z * x;
    let mut ans = pkm1 / qkm1;
    let (mut dpkm2, mut dqkm2, mut dpkm1, mut dqkm1) = (0.0, 0.0, 0.0, -x);
    let mut dans = (dpkm1 - ans * dqkm1) / qkm1;
    let mut go = enabled;
    let mut steps = 0;
    while go && steps < FRACTION_CAP {
        steps += 1;
        c += 1.0;
        y += 1.0;
        z += 2.0;
        let yc = y * c;
        let pk = pkm1 * z - pkm2 * yc;
        let qk = qkm1 * z - qkm2 * yc;
        let nonzero = qk != 0.0;
        let r = pk / qk;
        let t = if nonzero { ((ans - r) / r).abs() } else { 1.0 };
        if nonzero {
            ans = r;
        }
        let dpk = dpkm1 * z - pkm1 - dpkm2 * yc + pkm2 * c;
        let dqk = dqkm1 * z - qkm1 - dqkm2 * yc + qkm2 * c;
        let dans_new = if nonzero {
            (dpk - ans * dqk) / qk
        } else {
            dans
        };
        let grad_change = if nonzero {
            (dans_new - dans).abs()
        } else {
            1.0
        };
        (pkm2, pkm1, qkm2, qkm1) = (pkm1, pk, qkm1, qk);
        (dpkm2, dqkm2, dpkm1, dqkm1) = (dpkm1, dqkm1, dpk, dqk);
        if pk.abs() > 1.0 / eps {
            pkm2 *= eps;
            pkm1 *= eps;
            qkm2 *= eps;
            qkm1 *= eps;
            dpkm2 *= eps;
            dqkm2 *= eps;
            dpkm1 *= eps;
            dqkm1 *= eps;
        }
        dans = dans_new;
        go = match mode {
            Mode::Value => t > eps,
            Mode::Derivative => grad_change > eps,
        };
    }
    match mode {
        Mode::Value => ans * ax,
        Mode::Derivative => {
            let dlogax_da = x.ln() - digamma(a);
            ax * (ans * dlogax_da + dans)
        }
    }
}

/// `log(x^a e^-x / Gamma(a))`, and whether it is below the log of the smallest normal
/// reciprocal (where JAX skips the iterations: the factor is zero to the precision).
fn log_ax(a: f64, x: f64) -> (f64, bool) {
    let l = a * x.ln() - x - lgamma(a);
    (l, l < -f64::MAX.ln())
}

/// `P(a, x)`: NaN for NaN operands, `x < 0`, `a < 0` or `a = x = 0`; 0 at `x = 0` and 1 at
/// `x = inf`.
pub(super) fn igamma(a: f64, x: f64) -> f64 {
    let domain_error = x < 0.0 || a < 0.0 || (a == 0.0 && x == 0.0) || a.is_nan() || x.is_nan();
    if domain_error {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return 1.0;
    }
    if x == 0.0 {
        return 0.0;
    }
    let use_fraction = x >= 1.0 && x > a;
    let (l, underflow) = log_ax(a, x);
    let enabled = !underflow;
    let ax = l.exp();
    if use_fraction {
        1.0 - fraction(ax, x, a, enabled, Mode::Value)
    } else {
        series(ax, x, a, enabled, Mode::Value)
    }
}

/// `Q(a, x) = 1 - P(a, x)`: NaN where `P` is, 0 at `x = inf` and at `a = 0`.
pub(super) fn igammac(a: f64, x: f64) -> f64 {
    let domain_error = x < 0.0 || a < 0.0 || (a == 0.0 && x == 0.0) || a.is_nan() || x.is_nan();
    if domain_error {
        return f64::NAN;
    }
    if x == f64::INFINITY || a == 0.0 {
        return 0.0;
    }
    let use_series = x < 1.0 || x < a;
    let (l, underflow) = log_ax(a, x);
    let enabled = !underflow;
    let ax = l.exp();
    if use_series {
        1.0 - series(ax, x, a, enabled, Mode::Value)
    } else {
        fraction(ax, x, a, enabled, Mode::Value)
    }
}

/// `dP(a, x)/da`: NaN for NaN operands, `x < 0` or `a <= 0`; 0 at `x = 0`.
pub(super) fn igamma_grad_a(a: f64, x: f64) -> f64 {
    if x < 0.0 || a <= 0.0 || a.is_nan() || x.is_nan() {
        return f64::NAN;
    }
    if x == 0.0 {
        return 0.0;
    }
    let use_fraction = x > 1.0 && x > a;
    let (l, underflow) = log_ax(a, x);
    let enabled = !underflow;
    let ax = l.exp();
    if use_fraction {
        -fraction(ax, x, a, enabled, Mode::Derivative)
    } else {
        series(ax, x, a, enabled, Mode::Derivative)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // P(1, x) = 1 - e^-x; dP/da against a central difference.
        for &x in &[0.1f64, 0.5, 1.0, 2.0, 7.5, 30.0] {
            let p = 1.0 - (-x).exp();
            assert!((igamma(1.0, x) - p).abs() < 1e-14, "P(1, {x})");
            assert!((igammac(1.0, x) - (1.0 - p)).abs() < 1e-14, "Q(1, {x})");
        }
        for &(a, x) in &[(0.3, 0.2), (2.5, 1.5), (4.0, 9.0), (20.0, 18.0), (0.7, 3.0)] {
            let h = 1e-6;
            let fd = (igamma(a + h, x) - igamma(a - h, x)) / (2.0 * h);
            let g = igamma_grad_a(a, x);
            assert!(
                (g - fd).abs() < 1e-7 * (1.0 + fd.abs()),
                "dP/da({a}, {x}) = {g}, fd {fd}"
            );
        }
    }

    #[test]
    fn edges() {
        assert!(igamma(-1.0, 1.0).is_nan() && igamma(1.0, -1.0).is_nan());
        assert!(igamma(0.0, 0.0).is_nan() && igammac(0.0, 0.0).is_nan());
        assert_eq!(igamma(2.0, 0.0), 0.0);
        assert_eq!(igamma(2.0, f64::INFINITY), 1.0);
        assert_eq!(igammac(2.0, f64::INFINITY), 0.0);
        assert_eq!(igammac(0.0, 3.0), 0.0);
        assert!(igamma_grad_a(0.0, 1.0).is_nan());
        assert_eq!(igamma_grad_a(1.0, 0.0), 0.0);
    }
}
