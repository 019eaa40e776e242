//! Exact resource quantities for accounting: what a ResourceQuota adds up
//! and shows. `quantity::Quantity` is a float for comparisons; a quota's
//! `status.used` must add `100m` three times to exactly `300m`, and print it
//! the way Kubernetes' `resource.Quantity` prints it (`1536Mi`, `2k`,
//! `1500m`), so an amount is held in nano-units with the format it was
//! written in.

use std::cmp::Ordering;
use std::fmt;

/// How a quantity is written, as Kubernetes' `resource.Format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// `m`, ``, `k`, `M`, `G`… (and no suffix).
    #[default]
    DecimalSi,
    /// `Ki`, `Mi`, `Gi`…
    BinarySi,
    /// `1e3`.
    DecimalExponent,
}

/// A quantity in nano-units (1 = 1n) with its format. Two amounts compare by
/// value; the sum of two takes the format of the first non-zero one, as
/// `Quantity.Add` does.
#[derive(Debug, Clone, Copy, Default)]
pub struct Amount {
    nanos: i128,
    format: Format,
}

const NANO: i128 = 1_000_000_000;

impl PartialEq for Amount {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}
impl Eq for Amount {}
impl PartialOrd for Amount {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Amount {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Amount {
    /// A whole number of units (an object count).
    pub fn count(n: i64) -> Amount {
        Amount {
            nanos: n as i128 * NANO,
            format: Format::DecimalSi,
        }
    }

    /// Parses a quantity (`500m`, `1.5Gi`, `2e3`); None when it is not one.
    /// Precision below a nano-unit is rounded up, as Kubernetes rounds.
    pub fn parse(s: &str) -> Option<Amount> {
        let s = s.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(s.len());
        let (num, suffix) = s.split_at(split);
        let (negative, digits) = match num.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, num.strip_prefix('+').unwrap_or(num)),
        };
        let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if whole.is_empty() && frac.is_empty()
            || !whole
                .chars()
                .chain(frac.chars())
                .all(|c| c.is_ascii_digit())
        {
            return None;
        }
        let (format, base, exp10) = match suffix {
            "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
                let k = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
                    .iter()
                    .position(|x| *x == suffix)?;
                (Format::BinarySi, 1024i128.pow(k as u32 + 1), 0)
            }
            "" => (Format::DecimalSi, 1, 0),
            "n" => (Format::DecimalSi, 1, -9),
            "u" => (Format::DecimalSi, 1, -6),
            "m" => (Format::DecimalSi, 1, -3),
            "k" => (Format::DecimalSi, 1, 3),
            "M" => (Format::DecimalSi, 1, 6),
            "G" => (Format::DecimalSi, 1, 9),
            "T" => (Format::DecimalSi, 1, 12),
            "P" => (Format::DecimalSi, 1, 15),
            "E" => (Format::DecimalSi, 1, 18),
            e if e.starts_with(['e', 'E']) => {
                let exp: i32 = e[1..].parse().ok()?;
                (Format::DecimalExponent, 1, exp)
            }
            _ => return None,
        };
        // value = (whole.frac) * base * 10^exp10, in nanos: digits * 10^(exp10 + 9 - len(frac)).
        let mantissa: i128 = format!("{whole}{frac}").parse().unwrap_or(0);
        let shift = exp10 + 9 - frac.len() as i32;
        let scaled = mantissa.checked_mul(base)?;
        let nanos = if shift >= 0 {
            scaled.checked_mul(10i128.checked_pow(shift as u32)?)?
        } else {
            let div = 10i128.checked_pow((-shift) as u32)?;
            (scaled + div - 1) / div
        };
        Some(Amount {
            nanos: if negative { -nanos } else { nanos },
            format,
        })
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// Whether the amount is a whole number of units.
    pub fn is_integer(&self) -> bool {
        self.nanos % NANO == 0
    }

    /// Milli-units, rounded up (as `MilliValue`).
    pub fn millis(&self) -> i128 {
        let m = NANO / 1000;
        (self.nanos + m - 1).div_euclid(m)
    }

    /// The sum; its format is the first non-zero operand's.
    pub fn plus(self, other: Amount) -> Amount {
        Amount {
            nanos: self.nanos + other.nanos,
            format: if self.is_zero() {
                other.format
            } else {
                self.format
            },
        }
    }

    /// The difference, keeping this amount's format.
    pub fn minus(self, other: Amount) -> Amount {
        Amount {
            nanos: self.nanos - other.nanos,
            format: self.format,
        }
    }

    /// The value as a float of units (for ratios).
    pub fn as_f64(&self) -> f64 {
        self.nanos as f64 / NANO as f64
    }
}

impl fmt::Display for Amount {
    /// The canonical form Kubernetes prints: the largest suffix that keeps
    /// the number whole; binary amounts under 1024 or with a fraction are
    /// written in decimal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let sign = if self.nanos < 0 { "-" } else { "" };
        let abs = self.nanos.abs();
        let binary = self.format == Format::BinarySi && abs % NANO == 0 && abs >= 1024 * NANO;
        if binary {
            let mut units = abs / NANO;
            let mut k = 0;
            while k < 6 && units % 1024 == 0 {
                units /= 1024;
                k += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][k];
            return write!(f, "{sign}{units}{suffix}");
        }
        // Decimal: the largest exponent (a multiple of 3, from -9) keeping it whole.
        let mut mantissa = abs;
        let mut exp = -9;
        while exp < 18 && mantissa % 1000 == 0 {
            mantissa /= 1000;
            exp += 3;
        }
        let suffix = if self.format == Format::DecimalExponent {
            if exp == 0 {
                String::new()
            } else {
                format!("e{exp}")
            }
        } else {
            match exp {
                -9 => "n",
                -6 => "u",
                -3 => "m",
                0 => "",
                3 => "k",
                6 => "M",
                9 => "G",
                12 => "T",
                15 => "P",
                _ => "E",
            }
            .to_string()
        };
        write!(f, "{sign}{mantissa}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Amount {
        Amount::parse(s).unwrap()
    }

    #[test]
    fn prints_as_kubernetes_canonicalizes() {
        for (input, shown) in [
            ("100m", "100m"),
            ("1500m", "1500m"),
            ("2000m", "2"),
            ("0.5", "500m"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("128Mi", "128Mi"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("512", "512"),
            ("1e3", "1e3"),
            ("0", "0"),
            ("-1", "-1"),
        ] {
            assert_eq!(a(input).to_string(), shown, "{input}");
        }
    }

    #[test]
    fn sums_are_exact_and_keep_the_first_format() {
        let three = a("100m").plus(a("100m")).plus(a("100m"));
        assert_eq!(three.to_string(), "300m");
        assert_eq!(a("1Gi").plus(a("512Mi")).to_string(), "1536Mi");
        assert_eq!(Amount::default().plus(a("64Mi")).to_string(), "64Mi");
        assert_eq!(a("1").plus(a("500m")).to_string(), "1500m");
        assert_eq!(a("300m").minus(a("100m")).to_string(), "200m");
        assert!(a("1") > a("999m"));
        assert_eq!(a("1Ki"), a("1024"));
    }

    #[test]
    fn refuses_what_is_not_a_quantity() {
        for bad in ["", "abc", "1x", "1.2.3", "--1", "."] {
            assert!(Amount::parse(bad).is_none(), "{bad}");
        }
        assert_eq!(a("1n").millis(), 1);
        assert!(a("2").is_integer() && !a("1500m").is_integer());
    }
}
