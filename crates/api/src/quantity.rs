//! Resource quantities (`100m`, `1.5Gi`, `2e3`): parsing to a number so the
//! scheduler, kubelet and HPA can compare and add them.

use std::fmt;

/// A parsed quantity, held as a float of base units (cores, bytes).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Quantity(pub f64);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantityError(pub String);

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {:?}", self.0)
    }
}

impl std::error::Error for QuantityError {}

impl Quantity {
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        let err = || QuantityError(s.to_string());
        let s = s.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(s.len());
        let (num, suffix) = s.split_at(split);
        if num.is_empty() || num == "+" || num == "-" {
            return Err(err());
        }
        let n: f64 = num.parse().map_err(|_| err())?;
        let mult = match suffix {
            "" => 1.0,
            "n" => 1e-9,
            "u" => 1e-6,
            "m" => 1e-3,
            "k" => 1e3,
            "M" => 1e6,
            "G" => 1e9,
            "T" => 1e12,
            "P" => 1e15,
            "E" => 1e18,
            "Ki" => 1024.0,
            "Mi" => 1024f64.powi(2),
            "Gi" => 1024f64.powi(3),
            "Ti" => 1024f64.powi(4),
            "Pi" => 1024f64.powi(5),
            "Ei" => 1024f64.powi(6),
            e if e.starts_with(['e', 'E']) => {
                let exp: i32 = e[1..].parse().map_err(|_| err())?;
                10f64.powi(exp)
            }
            _ => return Err(err()),
        };
        Ok(Quantity(n * mult))
    }

    /// Milli-units (CPU millicores), rounded up as Kubernetes does.
    /// (The tiny slack keeps float noise such as 100.00000000000001 from rounding up.)
    pub fn millis(self) -> i64 {
        (self.0 * 1000.0 - 1e-6).ceil() as i64
    }

    /// Whole units (bytes), rounded up.
    pub fn units(self) -> i64 {
        (self.0 - 1e-6).ceil() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_ignores_float_noise() {
        assert_eq!(Quantity::parse("0.1").unwrap().millis(), 100);
        assert_eq!(Quantity::parse("1000000n").unwrap().millis(), 1);
        assert_eq!(Quantity::parse("1500000n").unwrap().millis(), 2);
        assert_eq!(Quantity::parse("1Ki").unwrap().units(), 1024);
    }

    #[test]
    fn parses() {
        assert_eq!(Quantity::parse("100m").unwrap().millis(), 100);
        assert_eq!(Quantity::parse("2").unwrap().millis(), 2000);
        assert_eq!(Quantity::parse("1.5").unwrap().millis(), 1500);
        assert_eq!(Quantity::parse("64Mi").unwrap().units(), 64 * 1024 * 1024);
        assert_eq!(Quantity::parse("1G").unwrap().units(), 1_000_000_000);
        assert_eq!(Quantity::parse("1e3").unwrap().units(), 1000);
        assert!(Quantity::parse("abc").is_err());
        assert!(Quantity::parse("1Zi").is_err());
        assert!(Quantity::parse("").is_err());
    }
}
