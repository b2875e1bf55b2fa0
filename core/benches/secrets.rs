//! The run's ten secrets the benches redact (API tokens, a password, a cookie), shared by the
//! reply benches here and the end-to-end bench in `tests/benches/e2e.rs`.

/// Ten secrets of a run, as a harness has them.
pub const SECRETS: [&str; 10] = [
    "ghp_R2d2C3poBb8WqLx0Zk7TfYv1Nm4Hs9Je",
    "sk-live-51HcQe2LkYz9Ab3Xc4Vd5Ef6Gh7Ij8Kl",
    "AKIAQWERTYUIOPASDF12wJalrXUtnFEMIK7MDENGbPxRfiCY",
    "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx",
    "Zu8#p!Lm2@qR",
    "eyJhbGciOiJIUzI1NiJ9.c2Vzc2lvbg.T0tFTg",
    "hunter2-but-longer",
    "Bearer-7f3a9c1e5b2d4f6a8c0e",
    "d41d8cd98f00b204e9800998ecf8427e",
    "postgres://admin:S3cr3tPassw0rd@db",
];
