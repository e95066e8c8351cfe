//! Special functions in `f64` for the reference evaluator: `erf`, `erfc`, `erf_inv`,
//! `lgamma` and `digamma`, with XLA's values at the edges (`lgamma` is `+inf` at the poles
//! and at `-inf`; `digamma` is NaN at zero, the negative integers and `-inf`;
//! `erf_inv(+-1)` is `+-inf` and NaN outside `[-1, 1]`).
//!
//! The methods are the textbook ones (power series and continued fractions for the error
//! functions, Newton-Halley refinement for its inverse, Lanczos' approximation for the
//! log-gamma, the asymptotic series for the digamma), accurate to about 1e-14 relative:
//! far below the `f32` rounding the evaluator applies, and below the error of XLA's own
//! approximations, which tests compare against with a tolerance.

use std::f64::consts::PI;

/// `2 / sqrt(pi)`.
const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

/// `erf(x)` for `|x| < 0.5` by its Taylor series (alternating, but its terms shrink by
/// `x^2 / n` so nothing cancels for small `x`).
fn erf_series(x: f64) -> f64 {
    let x2 = x * x;
    let mut term = x; // (-1)^n x^(2n+1) / n!
    let mut sum = x;
    for n in 1..60 {
        term *= -x2 / n as f64;
        let t = term / (2 * n + 1) as f64;
        sum += t;
        if t.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    TWO_OVER_SQRT_PI * sum
}

/// `erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (1 3 5 ... (2n+1))`: positive
/// terms, so accurate for moderate `x >= 0` (used for `0.5 <= x < 3`).
fn erf_positive_series(x: f64) -> f64 {
    let x2 = x * x;
    let mut term = x;
    let mut sum = x;
    for n in 1..200 {
        term *= 2.0 * x2 / (2 * n + 1) as f64;
        sum += term;
        if term < 1e-17 * sum {
            break;
        }
    }
    TWO_OVER_SQRT_PI * (-x2).exp() * sum
}

/// `erfc(x)` for `x >= 3` by its continued fraction (modified Lentz):
/// `erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))`.
fn erfc_continued_fraction(x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut f = x;
    let mut c = x;
    let mut d = 0.0;
    for n in 1..500 {
        let a = n as f64 / 2.0;
        d = x + a * d;
        if d == 0.0 {
            d = TINY;
        }
        c = x + a / c;
        if c == 0.0 {
            c = TINY;
        }
        d = 1.0 / d;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-x * x).exp() / (f * PI.sqrt())
}

/// The error function.
pub(super) fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let r = if a < 0.5 {
        return erf_series(x);
    } else if a < 3.0 {
        erf_positive_series(a)
    } else if a < 6.0 {
        1.0 - erfc_continued_fraction(a)
    } else {
        1.0
    };
    r.copysign(x)
}

/// The complementary error function `1 - erf(x)`, accurate where it is tiny.
pub(super) fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < 0.5 {
        if x > -0.5 {
            return 1.0 - erf_series(x);
        }
        return 2.0 - erfc(-x);
    }
    if x < 3.0 {
        return 1.0 - erf_positive_series(x);
    }
    if x > 27.5 {
        return 0.0;
    }
    erfc_continued_fraction(x)
}

/// The inverse error function: `erf_inv(erf(x)) = x`; `+-inf` at `+-1`, NaN outside.
pub(super) fn erf_inv(y: f64) -> f64 {
    if y.is_nan() || y.abs() > 1.0 {
        return f64::NAN;
    }
    if y.abs() == 1.0 {
        return f64::INFINITY.copysign(y);
    }
    if y == 0.0 {
        return y;
    }
    let a = y.abs();
    // A first guess by Giles' single-precision approximation, then Halley steps on
    // erf(x) - a, written as (1 - a) - erfc(x) near 1 (1 - a is exact there).
    let w = -((1.0 - a) * (1.0 + a)).ln();
    let mut x = if w < 5.0 {
        let w = w - 2.5;
        let mut p = 2.810_226_36e-08;
        for c in [
            3.432_739_39e-07,
            -3.523_387_7e-06,
            -4.391_506_54e-06,
            0.000_218_580_87,
            -0.001_253_725_03,
            -0.004_177_681_64,
            0.246_640_727,
            1.501_409_41,
        ] {
            p = c + p * w;
        }
        p * a
    } else {
        let w = w.sqrt() - 3.0;
        let mut p = -0.000_200_214_257;
        for c in [
            0.000_100_950_558,
            0.001_349_343_22,
            -0.003_673_428_44,
            0.005_739_507_73,
            -0.007_622_461_3,
            0.009_438_870_47,
            1.001_674_06,
            2.832_976_82,
        ] {
            p = c + p * w;
        }
        p * a
    };
    for _ in 0..6 {
        let residual = if a > 0.5 {
            (1.0 - a) - erfc(x)
        } else {
            erf(x) - a
        };
        let slope = TWO_OVER_SQRT_PI * (-x * x).exp();
        if slope == 0.0 {
            break;
        }
        let newton = residual / slope;
        // Halley: erf'' = -2x erf'.
        let step = newton / (1.0 + x * newton);
        x -= step;
        if step.abs() <= 1e-16 * x.abs() {
            break;
        }
    }
    x.copysign(y)
}

/// `sin(pi x)`, exact at the integers and accurate near them.
fn sin_pi(x: f64) -> f64 {
    let mut r = x.rem_euclid(2.0);
    let mut sign = 1.0;
    if r >= 1.0 {
        r -= 1.0;
        sign = -1.0;
    }
    sign * (PI * r.min(1.0 - r)).sin()
}

/// `cos(pi x)`, exact at the half-integers and accurate near them.
fn cos_pi(x: f64) -> f64 {
    let mut r = x.rem_euclid(2.0);
    let mut sign = 1.0;
    if r >= 1.0 {
        r -= 1.0;
        sign = -1.0;
    }
    if r <= 0.5 {
        sign * (PI * (0.5 - r)).sin()
    } else {
        -sign * (PI * (r - 0.5)).sin()
    }
}

/// Lanczos' approximation (g = 7, 9 terms) of `lgamma(x)` for `x >= 0.5`.
fn lgamma_lanczos(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let z = x - 1.0;
    let mut sum = C[0];
    for (k, c) in C.iter().enumerate().skip(1) {
        sum += c / (z + k as f64);
    }
    let t = z + G + 0.5;
    0.5 * (2.0 * PI).ln() + (z + 0.5) * t.ln() - t + sum.ln()
}

/// `log |Gamma(x)|`; `+inf` at the poles (zero and the negative integers) and at
/// `+-inf`, as XLA computes it.
pub(super) fn lgamma(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.is_infinite() {
        return f64::INFINITY;
    }
    if x <= 0.0 && x == x.floor() {
        return f64::INFINITY;
    }
    if x < 0.5 {
        // Reflection: Gamma(x) Gamma(1 - x) = pi / sin(pi x).
        return (PI / sin_pi(x).abs()).ln() - lgamma_lanczos(1.0 - x);
    }
    lgamma_lanczos(x)
}

/// The digamma function `d/dx lgamma(x)`; NaN at the poles and at `-inf`, as XLA.
pub(super) fn digamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return x;
    }
    if x <= 0.0 && x == x.floor() {
        return f64::NAN;
    }
    let mut x = x;
    let mut acc = 0.0;
    if x < 0.5 {
        // Reflection: psi(1 - x) - psi(x) = pi / tan(pi x).
        acc -= PI * cos_pi(x) / sin_pi(x);
        x = 1.0 - x;
    }
    while x < 10.0 {
        acc -= 1.0 / x;
        x += 1.0;
    }
    // The asymptotic series: ln x - 1/(2x) - sum_k B_2k / (2k x^2k).
    let inv2 = 1.0 / (x * x);
    let series = inv2
        * (1.0 / 12.0
            - inv2
                * (1.0 / 120.0
                    - inv2
                        * (1.0 / 252.0
                            - inv2
                                * (1.0 / 240.0
                                    - inv2
                                        * (1.0 / 132.0
                                            - inv2 * (691.0 / 32760.0 - inv2 / 12.0))))));
    acc + x.ln() - 0.5 / x - series
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rtol: f64) -> bool {
        a == b || (a - b).abs() <= rtol * b.abs().max(1e-300)
    }

    type Case = (fn(f64) -> f64, f64, f64);

    #[test]
    fn known_values() {
        // From tables (Abramowitz and Stegun, DLMF).
        let cases: &[Case] = &[
            (erf, 0.1, 0.112_462_916_018_284_9),
            (erf, 1.0, 0.842_700_792_949_714_9),
            (erf, 2.5, 0.999_593_047_982_555),
            (erf, -4.0, -0.999_999_984_582_742_1),
            (erfc, 1.0, 0.157_299_207_050_285_13),
            (erfc, 5.0, 1.537_459_794_428_034_8e-12),
            (erfc, 10.0, 2.088_487_583_762_544_7e-45),
            (erfc, -1.0, 1.842_700_792_949_715),
            (lgamma, 0.5, 0.572_364_942_924_700_1),
            (lgamma, 3.0, std::f64::consts::LN_2),
            (lgamma, 100.0, 359.134_205_369_575_4),
            (lgamma, -0.5, 1.265_512_123_484_645_4),
            (lgamma, 1e-8, 18.420_680_738_180_21),
            (digamma, 1.0, -0.577_215_664_901_532_9),
            (digamma, 0.5, -1.963_510_026_021_423_5),
            (digamma, 10.0, 2.251_752_589_066_721),
            (digamma, -0.5, 0.036_489_973_978_576_52),
            (digamma, 3.7, 1.167_153_539_361_511_3),
        ];
        for &(f, x, want) in cases {
            let got = f(x);
            assert!(close(got, want, 1e-13), "f({x}) = {got}, want {want}");
        }
    }

    #[test]
    fn erf_inv_inverts_erf() {
        for i in -999..=999 {
            let x = i as f64 * 0.006;
            let y = erf(x);
            // Beyond |x| = 4, 1 - |y| has too few bits left to say where x was.
            if x.abs() < 4.0 {
                let back = erf_inv(y);
                assert!(
                    close(back, x, 1e-9) || (back - x).abs() < 1e-12,
                    "{x}: {back}"
                );
            }
        }
        assert_eq!(erf_inv(1.0), f64::INFINITY);
        assert_eq!(erf_inv(-1.0), f64::NEG_INFINITY);
        assert!(erf_inv(1.5).is_nan() && erf_inv(f64::NAN).is_nan());
        assert!(close(erf_inv(0.5), 0.476_936_276_204_469_9, 1e-14));
        // Near 1, through erfc: erfc(5) = 1.5374597944280347e-12.
        assert!(close(erf_inv(1.0 - 1.537_459_794_428_034_7e-12), 5.0, 1e-4));
    }

    #[test]
    fn edges() {
        assert_eq!(lgamma(0.0), f64::INFINITY);
        assert_eq!(lgamma(-3.0), f64::INFINITY);
        assert_eq!(lgamma(f64::NEG_INFINITY), f64::INFINITY);
        assert!(digamma(0.0).is_nan() && digamma(-2.0).is_nan());
        assert!(digamma(f64::NEG_INFINITY).is_nan());
        assert_eq!(digamma(f64::INFINITY), f64::INFINITY);
        assert_eq!(erf(f64::INFINITY), 1.0);
        assert_eq!(erfc(f64::NEG_INFINITY), 2.0);
        assert_eq!(erfc(f64::INFINITY), 0.0);
    }
}
