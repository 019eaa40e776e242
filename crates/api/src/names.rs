//! The name and label formats Kubernetes checks (RFC 1123 labels and
//! subdomains, RFC 1035 labels, qualified names, label values, port names),
//! with its exact messages. A leaf: validation and selectors both use it.

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn is_alnum_lower(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

pub fn dns1123_label_error(s: &str) -> Option<String> {
    if s.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    let ok = !s.is_empty()
        && s.chars().all(|c| is_alnum_lower(c) || c == '-')
        && s.starts_with(is_alnum_lower)
        && s.ends_with(is_alnum_lower);
    (!ok).then(|| DNS1123_LABEL_MSG.into())
}

pub fn dns1123_subdomain_error(s: &str) -> Option<String> {
    if s.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    let ok = !s.is_empty()
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.chars().all(|c| is_alnum_lower(c) || c == '-')
                && l.starts_with(is_alnum_lower)
                && l.ends_with(is_alnum_lower)
        });
    (!ok).then(|| DNS1123_SUBDOMAIN_MSG.into())
}

pub fn dns1035_label_error(s: &str) -> Option<String> {
    if s.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    let ok = !s.is_empty()
        && s.chars().all(|c| is_alnum_lower(c) || c == '-')
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.ends_with(is_alnum_lower);
    (!ok).then(|| DNS1035_LABEL_MSG.into())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'
}

/// Label keys and annotation keys: `[prefix/]name`.
pub fn qualified_name_error(s: &str) -> Option<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Some("prefix part must be non-empty".into());
        }
        if let Some(e) = dns1123_subdomain_error(p) {
            return Some(format!("prefix part {e}"));
        }
    }
    if name.is_empty() || name.len() > 63 {
        return Some("name part must be non-empty and no more than 63 characters".into());
    }
    let ok = name.chars().all(is_name_char)
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    (!ok).then(|| "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".into())
}

pub fn label_value_error(s: &str) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    if s.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    let ok = s.chars().all(is_name_char)
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric());
    (!ok).then(|| "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".into())
}

/// An IANA service name (named ports): ≤15 chars, lowercase alnum and '-', at least one letter.
pub fn port_name_error(s: &str) -> Option<String> {
    let ok = !s.is_empty()
        && s.len() <= 15
        && s.chars().all(|c| is_alnum_lower(c) || c == '-')
        && s.chars().any(|c| c.is_ascii_lowercase())
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--");
    (!ok).then(|| "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-), at most 15 characters, contain at least one letter, and not start or end with a hyphen".into())
}

/// Kubernetes' rule for a projected file's path: relative, never `..`.
pub fn item_path_error(p: &str) -> Option<&'static str> {
    if p.starts_with('/') {
        Some("must be a relative path")
    } else if p.split('/').any(|part| part == "..") {
        Some("must not contain '..'")
    } else if p.is_empty() {
        Some("must not be empty")
    } else {
        None
    }
}
