//! How a browser signs in to the web view (`crate::ui`), an
//! authenticator of its own. A browser holds no client
//! certificate and sends no `Authorization` header when it opens a page,
//! so whoever holds credentials (a kubeconfig's certificate, a token) asks
//! for a one-time login code (`POST /ui/session`, e.g. `kubectl create
//! --raw /ui/session -f -`), and the browser trades it at `/ui/login` for
//! a session cookie. The session is the same user with the same groups:
//! every answer of the view is authorized as that user.
//!
//! The cookie is `HttpOnly`, `SameSite=Strict` and scoped to `/ui/`, and
//! it only authenticates reads of the view (GET under `/ui/`): it can
//! write nothing, so a page on another site gains nothing by it.

use super::UserInfo;
use axum::http::{HeaderMap, Method};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The cookie's name.
pub const COOKIE: &str = "minik8s-ui";
/// The sign-in page (public: a login code is the credential).
pub const LOGIN: &str = "/ui/login";

/// Whether `path` is the web view's (what the cookie may read).
pub fn is_view(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}
/// How long a login code may wait to be used.
pub const CODE_TTL: Duration = Duration::from_secs(300);
/// How long a signed-in browser stays signed in.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// Codes and sessions kept at most (the oldest expire first).
const MAX_ENTRIES: usize = 10_000;

struct Entry {
    user: UserInfo,
    expires: Instant,
}

#[derive(Default)]
pub struct Sessions {
    codes: Mutex<HashMap<String, Entry>>,
    sessions: Mutex<HashMap<String, Entry>>,
}

fn secret() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn keep(map: &Mutex<HashMap<String, Entry>>, user: UserInfo, ttl: Duration) -> String {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    map.retain(|_, e| e.expires > now);
    if map.len() >= MAX_ENTRIES {
        if let Some(oldest) = map
            .iter()
            .min_by_key(|(_, e)| e.expires)
            .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
    }
    let key = secret();
    map.insert(
        key.clone(),
        Entry {
            user,
            expires: now + ttl,
        },
    );
    key
}

impl Sessions {
    /// A one-time login code for `user`.
    pub fn code_for(&self, user: &UserInfo) -> String {
        keep(&self.codes, user.clone(), CODE_TTL)
    }

    /// Trades a login code (once) for a session id.
    pub fn redeem(&self, code: &str) -> Option<String> {
        let entry = self
            .codes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(code)?;
        (entry.expires > Instant::now()).then(|| keep(&self.sessions, entry.user, SESSION_TTL))
    }

    /// The user of a live session.
    pub fn user(&self, session: &str) -> Option<UserInfo> {
        let map = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        map.get(session)
            .filter(|e| e.expires > Instant::now())
            .map(|e| e.user.clone())
    }
}

impl Sessions {
    /// The user of a browser's session cookie, for the reads of the view
    /// only: the cookie can write nothing.
    pub fn user_of(&self, method: &Method, path: &str, headers: &HeaderMap) -> Option<UserInfo> {
        if *method != Method::GET || !is_view(path) {
            return None;
        }
        self.user(&cookie(headers)?)
    }
}

/// The session id a request's `Cookie` header carries.
pub fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_signs_in_once_as_its_user() {
        let s = Sessions::default();
        let alice = UserInfo::new("alice", &["students"]);
        let code = s.code_for(&alice);
        let session = s.redeem(&code).expect("the code signs in");
        assert_eq!(s.user(&session).unwrap().username, "alice");
        assert!(s.redeem(&code).is_none(), "a code works once");
        assert!(s.user(&code).is_none(), "a code is no session");
        assert!(s.user("guess").is_none());
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = axum::http::HeaderMap::new();
        h.insert(
            axum::http::header::COOKIE,
            "a=1; minik8s-ui=abc; b=2".parse().unwrap(),
        );
        assert_eq!(cookie(&h).as_deref(), Some("abc"));
    }
}
