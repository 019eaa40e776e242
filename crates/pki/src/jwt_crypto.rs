//! The crypto under `jsonwebtoken`: a `CryptoProvider` over `ring`, the
//! library the rest of the cluster's TLS and certificates already use, so
//! JWTs do not bring a second crypto stack. jsonwebtoken parses, encodes and
//! validates tokens (header, claims, times, issuer, audience); this module
//! only signs and checks signatures, for the two algorithms the cluster
//! uses: ES256 (ServiceAccount tokens) and HS256 (bootstrap-token
//! signatures of `cluster-info`). Any other algorithm is refused.
//!
//! Keys, as this provider reads them: an ES256 `EncodingKey` holds a PKCS#8
//! private key (DER), an ES256 `DecodingKey` the public key as an
//! uncompressed point; HS256 keys are the shared secret.

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{Error, ErrorKind};
use jsonwebtoken::signature::{self, Signer, Verifier};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, EncodingKey};
use ring::signature::{EcdsaKeyPair, UnparsedPublicKey};
use ring::{hmac, rand::SystemRandom};

/// Makes this provider jsonwebtoken's for the process (once; later calls
/// find it installed).
pub(crate) fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Fails only if another provider came first, which then serves.
        let _ = RING.install_default();
    });
}

static RING: CryptoProvider = CryptoProvider {
    signer_factory: new_signer,
    verifier_factory: new_verifier,
    // JWK key utilities (thumbprints, public components) are not used.
    key_utils: KeyUtils::new_unimplemented(),
};

fn new_signer(alg: &Algorithm, key: &EncodingKey) -> Result<Box<dyn JwtSigner>, Error> {
    match (alg, key.family()) {
        (Algorithm::ES256, AlgorithmFamily::Ec) => {
            let pair = EcdsaKeyPair::from_pkcs8(
                &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                key.as_bytes(),
                &SystemRandom::new(),
            )
            .map_err(|_| ErrorKind::InvalidEcdsaKey)?;
            Ok(Box::new(Es256Signer(pair)))
        }
        (Algorithm::HS256, AlgorithmFamily::Hmac) => Ok(Box::new(Hs256(hmac::Key::new(
            hmac::HMAC_SHA256,
            key.as_bytes(),
        )))),
        (Algorithm::ES256 | Algorithm::HS256, _) => Err(ErrorKind::InvalidKeyFormat.into()),
        _ => Err(ErrorKind::InvalidAlgorithm.into()),
    }
}

fn new_verifier(alg: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>, Error> {
    let bytes = key.try_get_as_bytes()?.to_vec();
    match (alg, key.family()) {
        (Algorithm::ES256, AlgorithmFamily::Ec) => Ok(Box::new(Es256Verifier(bytes))),
        (Algorithm::HS256, AlgorithmFamily::Hmac) => {
            Ok(Box::new(Hs256(hmac::Key::new(hmac::HMAC_SHA256, &bytes))))
        }
        (Algorithm::ES256 | Algorithm::HS256, _) => Err(ErrorKind::InvalidKeyFormat.into()),
        _ => Err(ErrorKind::InvalidAlgorithm.into()),
    }
}

struct Es256Signer(EcdsaKeyPair);

impl Signer<Vec<u8>> for Es256Signer {
    fn try_sign(&self, msg: &[u8]) -> Result<Vec<u8>, signature::Error> {
        self.0
            .sign(&SystemRandom::new(), msg)
            .map(|s| s.as_ref().to_vec())
            .map_err(|_| signature::Error::new())
    }
}

impl JwtSigner for Es256Signer {
    fn algorithm(&self) -> Algorithm {
        Algorithm::ES256
    }
}

/// The public key as an uncompressed point.
struct Es256Verifier(Vec<u8>);

impl Verifier<Vec<u8>> for Es256Verifier {
    fn verify(&self, msg: &[u8], sig: &Vec<u8>) -> Result<(), signature::Error> {
        UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, &self.0)
            .verify(msg, sig)
            .map_err(|_| signature::Error::new())
    }
}

impl JwtVerifier for Es256Verifier {
    fn algorithm(&self) -> Algorithm {
        Algorithm::ES256
    }
}

/// HMAC-SHA256 both ways (`hmac::verify` compares in constant time).
struct Hs256(hmac::Key);

impl Signer<Vec<u8>> for Hs256 {
    fn try_sign(&self, msg: &[u8]) -> Result<Vec<u8>, signature::Error> {
        Ok(hmac::sign(&self.0, msg).as_ref().to_vec())
    }
}

impl Verifier<Vec<u8>> for Hs256 {
    fn verify(&self, msg: &[u8], sig: &Vec<u8>) -> Result<(), signature::Error> {
        hmac::verify(&self.0, msg, sig).map_err(|_| signature::Error::new())
    }
}

impl JwtSigner for Hs256 {
    fn algorithm(&self) -> Algorithm {
        Algorithm::HS256
    }
}

impl JwtVerifier for Hs256 {
    fn algorithm(&self) -> Algorithm {
        Algorithm::HS256
    }
}
