//! The string formats a CRD schema may name (Kubernetes' list, kube-openapi's
//! checks). Formats Kubernetes does not check (`password`, `int32`...) and
//! unknown ones always pass, as there.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Does `text` have `format`?
pub fn valid(format: &str, text: &str) -> bool {
    match format {
        "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(text).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok(),
        "uuid" | "uuid3" | "uuid4" | "uuid5" => uuid(format, text),
        "ipv4" => text.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<Ipv6Addr>().is_ok(),
        "cidr" => cidr(text),
        "mac" => mac(text),
        "hostname" => hostname(text),
        "email" => email(text),
        "uri" => uri(text),
        "byte" => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .is_ok()
        }
        "duration" => minik8s_api::meta::parse_duration(text).is_ok(),
        "hexcolor" => {
            text.len() == 7
                && text.starts_with('#')
                && text[1..].chars().all(|c| c.is_ascii_hexdigit())
        }
        _ => true,
    }
}

fn uuid(format: &str, text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    let shape = groups.len() == 5
        && groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()));
    let version = match format {
        "uuid3" => Some('3'),
        "uuid4" => Some('4'),
        "uuid5" => Some('5'),
        _ => None,
    };
    shape && version.is_none_or(|v| groups[2].starts_with(v))
}

fn cidr(text: &str) -> bool {
    let Some((ip, bits)) = text.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    (ip.parse::<Ipv4Addr>().is_ok() && bits <= 32)
        || (ip.parse::<Ipv6Addr>().is_ok() && bits <= 128)
}

fn mac(text: &str) -> bool {
    let parts: Vec<&str> = text.split([':', '-']).collect();
    matches!(parts.len(), 6 | 8 | 20)
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

fn hostname(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 255
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn email(text: &str) -> bool {
    match text.rsplit_once('@') {
        Some((local, domain)) => !local.is_empty() && !local.contains(' ') && hostname(domain),
        None => false,
    }
}

fn uri(text: &str) -> bool {
    match text.split_once(':') {
        Some((scheme, rest)) => {
            !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !rest.is_empty()
                && !text.contains(' ')
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::valid;

    #[test]
    fn formats_accept_and_refuse() {
        for (format, good, bad) in [
            ("date-time", "2026-11-26T10:00:00Z", "2026-11-26"),
            ("date", "2026-11-26", "26/11/2026"),
            ("uuid", "0b4e8f4c-1d7b-4a4e-9c1e-3f2a1b0c9d8e", "nope"),
            (
                "uuid4",
                "0b4e8f4c-1d7b-4a4e-9c1e-3f2a1b0c9d8e",
                "0b4e8f4c-1d7b-3a4e-9c1e-3f2a1b0c9d8e",
            ),
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("ipv6", "fd00::1", "fd00:::1"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("mac", "02:42:ac:11:00:02", "02:42:ac"),
            ("hostname", "a.example.com", "-bad-.com"),
            ("email", "a@example.com", "a.example.com"),
            ("uri", "https://example.com/x", "example"),
            ("byte", "aGVsbG8=", "not base64!"),
            ("duration", "1h30m", "forever"),
            ("hexcolor", "#a0b1c2", "red"),
        ] {
            assert!(valid(format, good), "{format}: {good}");
            assert!(!valid(format, bad), "{format}: {bad}");
        }
        assert!(valid("password", "anything"));
        assert!(valid("some-unknown-format", "anything"));
    }
}
