//! Redaction: which environment values are secrets of the run, and scrubbing them out of every
//! text the harness sees (tool text, error, raw reply) before it is metered or returned.
//!
//! This module owns the *rule* ([`is_secret_var`]), the collection ([`collect_run_secrets`]),
//! the one-shot [`redact`] and the streaming [`Redactor`] / [`RedactingSink`]. It does not read
//! the environment (the host hands it the variables) and it never allocates.
//!
//! # Which variables are secrets
//!
//! A variable's name is split into tokens on `_` and `-`, compared ASCII case-insensitively.
//! Its value is a secret when all of these hold:
//!
//! 1. **A token looks like a secret**: it is exactly one of `KEY`, `SECRET`, `SECRETS`, `TOKEN`,
//!    `PASSWORD`, `PASSWD`, `PASS`, `PWD`, `PASSPHRASE`, `CREDENTIAL`, `CREDENTIALS`, `PRIVATE`,
//!    `AUTH`, `APIKEY`, `COOKIE`; or it *ends* with one of the unambiguous words `PASSWORD`,
//!    `PASSWD`, `PASSPHRASE`, `SECRET`, `TOKEN`, `APIKEY`, `CREDENTIALS` (so `PGPASSWORD` and
//!    `GITHUBTOKEN` count, while `MONKEY`, `BYPASS` and `TOKENIZERS` do not).
//! 2. **The name does not end in an identifier**: the last token is none of `ID`, `IDS`, `URL`,
//!    `URI`, `ENDPOINT`, `HOST`, `HOSTNAME`, `PORT`, `ADDR`, `ADDRESS`, `DOMAIN`, `NAME`,
//!    `USER`, `USERNAME`, `EMAIL`, `ACCOUNT`, `FILE`, `PATH`, `DIR`, `SOCK`, `SOCKET`,
//!    `REGION`, `ARN`, `TYPE`, `MODE`, `METHOD`, `ALGORITHM`, `VERSION`, `ENABLED`,
//!    `DISABLED`, `TIMEOUT`, `TTL`, `EXPIRY`, `LENGTH`, `SIZE`, `COUNT`, `LIMIT`, `SCOPE`,
//!    `ISSUER`, `AUDIENCE`, `PROFILE`, `PROVIDER`, `FINGERPRINT` (so `AWS_ACCESS_KEY_ID`,
//!    `KB_ENDPOINT_URL`, `KEY_ID`, `PASSWORD_FILE` and `SSH_AUTH_SOCK` are left alone).
//! 3. **It is not public**: no token is `PUBLIC` or `PUBLISHABLE` (`SSH_PUBLIC_KEY`).
//! 4. **It is not the shell's working directory**: the names `PWD` and `OLDPWD` hold paths.
//! 5. **The value is real**: trimmed, it has at least 4 characters and is not a placeholder
//!    (case-insensitive): `disabled`, `enabled`, `none`, `null`, `nil`, `undefined`, `unset`,
//!    `false`, `true`, `yes`, `no`, `on`, `off`, `0`, `1`, `empty`, `changeme`, `password`,
//!    `secret`, `token`, `placeholder`, `dummy`, `example`, `redacted`, `n/a`.
//!
//! `SESSION` is deliberately *not* a secret word: `XDG_SESSION_TYPE=wayland` or
//! `XDG_SESSION_DESKTOP=ubuntu` would otherwise turn ordinary words of tool output into
//! `[REDACTED]`. Real session secrets carry a secret word anyway (`SESSION_TOKEN`,
//! `SESSION_SECRET`, `SESSION_KEY`, `SESSION_COOKIE`). The same reasoning keeps common words
//! (`password`, `changeme`) out as values: redaction must never scrub evidence, and a default
//! credential showing up in a tool's output *is* evidence.
//!
//! # How text is redacted
//!
//! Every byte covered by any occurrence of any secret is removed, and each maximal run of
//! covered bytes becomes one `[REDACTED]`. This is at least as strong as replacing "longest
//! first": overlapping or adjacent occurrences (`abcd` and `cdef` in `abcdef`) merge into one
//! marker instead of leaving a tail behind. Secrets shorter than [`MIN_SECRET_LEN`] bytes are
//! skipped: redaction is a last-chance scrub, not a design (`docs/design.md#redaction`).
//!
//! The streaming [`Redactor`] holds back only `longest - 1` bytes between writes, so a secret
//! split across any chunk boundary is still caught. On the host, candidate positions are those
//! that start one of the secrets' leading byte pairs (up to 16 distinct pairs, tested a block at
//! a time); with more, it finds them with `memchr3` on each secret's *anchor*, its rarest byte
//! among the first 16 (so a secret starting with a common letter does not make every word a
//! candidate). The edge (no `std`: less code, no tables) takes every position whose byte starts
//! a secret. Every input position is examined at most once.
//!
//! On x86-64 (SSE2) and AArch64 (NEON) a [`Redactor`] also builds one `memchr` packed-pair
//! finder per pattern (at most [`MAX_FINDERS`]) on its first write of [`FINDERS_FROM`] bytes:
//! each new chunk is searched by every finder (a vectorised scan for two of the pattern's rarest
//! bytes, then a compare), and the matches, merged in order of start, decide the covered runs.
//! With the `std` feature (the host) a write of [`PACKED_FROM`] bytes builds instead one
//! packed searcher for all the patterns (aho-corasick's Teddy, leftmost-longest), so a chunk is
//! searched once whatever the number of secrets. Only starts inside the held-back bytes (a
//! pattern may continue into the chunk there) still go through the anchor search, which is also
//! the whole search for short texts, larger pattern sets and on the edge (no extra code or RAM
//! there). Every search finds every occurrence, so the output is the same.

mod rule;
mod search;
mod stream;

pub use rule::{
    JsonForm, MARKER, MIN_SECRET_LEN, Redacted, RunSecrets, collect_run_secrets, is_secret_var,
    json_form_differs, write_json_form,
};
pub use search::{FINDERS_FROM, MAX_FINDERS, PACKED_FROM};
pub use stream::{DEFAULT_HOLD, RedactingSink, Redactor, STAGE, redact};

#[cfg(test)]
mod tests {
    #[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
    use super::search::Packed;
    use super::search::{ANCHOR_WINDOW, Finders, PAIRS, Patterns, first_bytes};
    use super::*;
    use crate::buf::{Buf, Overflow, Sink, SliceBuf};
    use proptest::prelude::*;
    use std::string::String;
    use std::vec::Vec;

    /// An uncapped sink for tests.
    #[derive(Default)]
    struct Out(Vec<u8>);
    impl Sink for Out {
        fn put(&mut self, bytes: &[u8]) -> Result<(), Overflow> {
            self.0.extend_from_slice(bytes);
            Ok(())
        }
    }

    /// Streams `text` through a redactor for `secrets` in one big write (so the finders or
    /// the packed searcher are used, from the thread's memo when the set was seen before).
    fn in_one_write(text: &str, secrets: &[&str]) -> String {
        let mut out = Out::default();
        let mut r = Redactor::new(secrets);
        r.write(text.as_bytes(), &mut out).unwrap();
        r.finish(&mut out).unwrap();
        String::from_utf8(out.0).unwrap()
    }

    #[test]
    fn searchers_kept_for_one_set_never_serve_another() {
        let a = ["alpha-secret-0001", "bravo-secret-0002"];
        let b = ["alpha-secret-0001", "charlie-secret-03"];
        // Same lengths, different bytes; a prefix; a longer set; a shorter one.
        let c = ["alpha-secret-0001", "bravo-secret-0003"];
        let d = ["alpha-secret-0001"];
        let e = [
            "alpha-secret-0001",
            "bravo-secret-0002",
            "delta-secret-0004",
        ];
        for len in [300, 2000] {
            let pad = "x".repeat(len);
            let text = std::format!(
                "{pad} alpha-secret-0001 bravo-secret-0002 charlie-secret-03 bravo-secret-0003 delta-secret-0004 {pad}"
            );
            for _ in 0..2 {
                for set in [&a[..], &b, &c, &d, &e, &a] {
                    assert_eq!(
                        in_one_write(&text, set),
                        once(&text, set),
                        "{set:?} at {len}"
                    );
                    for s in set {
                        assert!(!in_one_write(&text, set).contains(s), "{s} at {len}");
                    }
                }
            }
        }
    }

    fn once(text: &str, secrets: &[&str]) -> String {
        let mut out = Out::default();
        redact(text.as_bytes(), secrets, &mut out).unwrap();
        String::from_utf8(out.0).unwrap()
    }

    /// The reference: mark covered bytes, then collapse runs.
    fn reference(text: &[u8], secrets: &[Vec<u8>]) -> Vec<u8> {
        let mut covered = std::vec![false; text.len()];
        for s in secrets.iter().filter(|s| s.len() >= MIN_SECRET_LEN) {
            for i in 0..text.len() {
                if text[i..].starts_with(s) {
                    for c in &mut covered[i..i + s.len()] {
                        *c = true;
                    }
                }
            }
        }
        let mut out = Vec::new();
        for i in 0..text.len() {
            if !covered[i] {
                out.push(text[i]);
            } else if i == 0 || !covered[i - 1] {
                out.extend_from_slice(MARKER.as_bytes());
            }
        }
        out
    }

    fn streamed<const H: usize>(text: &[u8], secrets: &[Vec<u8>], cuts: &[usize]) -> Vec<u8> {
        streamed_by::<H>(text, secrets, cuts, true)
    }

    /// Streams with every searcher the target has; also says whether the packed one was built.
    fn streamed_packed<const H: usize>(
        text: &[u8],
        secrets: &[Vec<u8>],
        cuts: &[usize],
    ) -> (Vec<u8>, bool) {
        let mut r: Redactor<'_, Vec<u8>, H> = Redactor::with_hold(secrets);
        let mut out = Out::default();
        let mut at = 0;
        #[cfg_attr(not(feature = "std"), allow(unused_mut))]
        let mut built = false;
        for &c in cuts.iter().chain([&text.len()]) {
            let c = c.min(text.len()).max(at);
            r.write(&text[at..c], &mut out).unwrap();
            #[cfg(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")))]
            {
                built |= matches!(r.finders.packed, Packed::Built(..));
            }
            at = c;
        }
        r.finish(&mut out).unwrap();
        (out.0, built)
    }

    /// Streams with or without the `memmem` finders (without: the anchor search alone).
    fn streamed_by<const H: usize>(
        text: &[u8],
        secrets: &[Vec<u8>],
        cuts: &[usize],
        finders: bool,
    ) -> Vec<u8> {
        let mut r: Redactor<'_, Vec<u8>, H> = Redactor::with_hold(secrets);
        if finders {
            // Build the per-pattern finders now, so that small writes use them too.
            let pats = Patterns {
                secrets,
                piece: r.pats.piece,
            };
            r.finders.prepare(&pats, FINDERS_FROM);
        } else {
            r.finders.disable();
            assert!(!r.finders.active());
        }
        let mut out = Out::default();
        let mut at = 0;
        for &c in cuts {
            let c = c.min(text.len()).max(at);
            r.write(&text[at..c], &mut out).unwrap();
            at = c;
        }
        r.write(&text[at..], &mut out).unwrap();
        r.finish(&mut out).unwrap();
        out.0
    }

    #[test]
    fn seed_cases_exactly_as_written() {
        let env = [
            ("MY_API_KEY", "sk-live-9f8e7d6c5b4a"),
            ("DB_PASSWORD", "hunter2-correct-horse"),
            ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE"),
            ("KB_ENDPOINT_URL", "https://kb.internal.example/api"),
            ("SHORT_TOKEN", "abc"),
            ("NVIDIA_API_KEY", "disabled"),
        ];
        let got: Vec<&str> = collect_run_secrets(env).collect();
        assert_eq!(got, ["sk-live-9f8e7d6c5b4a", "hunter2-correct-horse"]);
    }

    #[test]
    fn real_environment_cases() {
        let collected = [
            ("GITHUB_TOKEN", "ghp_abcdefghijklmnop"),
            ("OPENAI_API_KEY", "sk-proj-abcdef123456"),
            ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG"),
            ("PGPASSWORD", "pg-secret-value"),
            ("SSH_PRIVATE_KEY", "-----BEGIN OPENSSH PRIVATE KEY-----"),
            ("SESSION_TOKEN", "st-1234567890"),
            ("github-token", "lowercase-dashes"),
            ("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEBAaDH"),
            ("DOCKER_AUTH_CONFIG", "{\"auths\":{}}"),
            ("SLACK_WEBHOOK_SECRET", "whsec_abcdef"),
        ];
        for (k, v) in collected {
            assert!(is_secret_var(k, v), "{k} should be collected");
        }
        let left = [
            ("PATH", "/usr/local/bin:/usr/bin"),
            ("HOME", "/root"),
            ("TOKENIZERS_PARALLELISM", "false"),
            ("KEY_ID", "key-1234567"),
            ("PASSWORD_FILE", "/run/secrets/db"),
            ("PWD", "/work/wt/harness"),
            ("OLDPWD", "/work"),
            ("SSH_AUTH_SOCK", "/tmp/ssh-XXXX/agent.1"),
            ("SSH_PUBLIC_KEY", "ssh-ed25519 AAAAC3Nz"),
            ("XDG_SESSION_DESKTOP", "ubuntu"),
            ("MONKEY", "banana-bread"),
            ("DB_PASSWORD", "  NULL  "),
            ("DB_PASSWORD", "changeme"),
            ("API_TOKEN", ""),
            ("GIT_ASKPASS", "/usr/lib/git-core/git-gui--askpass"),
            ("KEYBOARD_LAYOUT", "us-intl"),
            ("SSH_PRIVATE_KEY_PATH", "/root/.ssh/id_ed25519"),
            ("AUTH_TOKEN_URL", "https://auth.example/token"),
            ("LANG", "C.UTF-8"),
        ];
        for (k, v) in left {
            assert!(!is_secret_var(k, v), "{k}={v} should be left alone");
        }
        let mut all: Vec<(&str, &str)> = collected.to_vec();
        all.extend(left);
        assert_eq!(collect_run_secrets(all).count(), collected.len());
    }

    #[test]
    fn a_value_that_is_not_utf8_is_still_a_secret() {
        // `FOO=$'caf\xe9'` panicked `std::env::vars()`; as bytes it is read, and a secret-named
        // one is collected and redacted as bytes.
        let env: Vec<(Vec<u8>, Vec<u8>)> = std::vec![
            (b"FOO".to_vec(), b"caf\xe9".to_vec()),
            (b"DB_PASSWORD".to_vec(), b"hunter\xff\xfe-2".to_vec()),
            (b"API_\xffTOKEN".to_vec(), b"\xe9\xe9\xe9".to_vec()),
        ];
        let got: Vec<Vec<u8>> = collect_run_secrets(env).collect();
        assert_eq!(got, [b"hunter\xff\xfe-2".to_vec()]);
        let mut out = Out::default();
        redact(b"pw=hunter\xff\xfe-2!", &got, &mut out).unwrap();
        assert_eq!(out.0, b"pw=[REDACTED]!");
    }

    #[test]
    fn collects_owned_strings() {
        let env: Vec<(String, String)> = std::vec![
            ("A_SECRET".into(), "s3cr3t-value".into()),
            ("LANG".into(), "C.UTF-8".into()),
        ];
        let got: Vec<String> = collect_run_secrets(env).collect();
        assert_eq!(got, ["s3cr3t-value"]);
    }

    #[test]
    fn ordinary_words_in_output_stay() {
        let env = [
            ("XDG_SESSION_TYPE", "wayland"),
            ("NVIDIA_API_KEY", "disabled"),
            ("DB_PASSWORD", "password"),
            ("USER", "root"),
        ];
        let secrets: Vec<&str> = collect_run_secrets(env).collect();
        let text = "22/tcp open ssh root login: password disabled on wayland";
        assert_eq!(once(text, &secrets), text);
    }

    #[test]
    fn replaces_and_merges() {
        assert_eq!(once("x=hunter22;", &["hunter22"]), "x=[REDACTED];");
        assert_eq!(once("hunter22hunter22", &["hunter22"]), "[REDACTED]");
        assert_eq!(once("abcdef!", &["abcd", "cdef"]), "[REDACTED]!");
        assert_eq!(once("abcdXabcd", &["abcd"]), "[REDACTED]X[REDACTED]");
        assert_eq!(once("key abc here", &["abc"]), "key abc here");
        assert_eq!(once("", &["abcd"]), "");
        assert_eq!(once("abcd", &[] as &[&str]), "abcd");
        // Longest first: the shorter secret inside a longer one leaves no tail.
        assert_eq!(
            once("tok-ABCDEFGH.", &["ABCD", "ABCDEFGH"]),
            "tok-[REDACTED]."
        );
    }

    #[test]
    fn split_across_every_boundary() {
        let secrets = [b"s3cr3t-v4lue".to_vec(), b"zz99".to_vec()];
        let text = b"before s3cr3t-v4lue mid zz99zz99 after s3cr3t-v4l";
        let want = reference(text, &secrets);
        for i in 0..=text.len() {
            for j in i..=text.len() {
                assert_eq!(
                    streamed::<64>(text, &secrets, &[i, j]),
                    want,
                    "cuts {i},{j}"
                );
            }
        }
        // Byte by byte.
        let cuts: Vec<usize> = (0..text.len()).collect();
        assert_eq!(streamed::<64>(text, &secrets, &cuts), want);
    }

    #[test]
    fn holds_back_only_longest_minus_one() {
        let secrets = ["0123456789"];
        let mut r = Redactor::new(&secrets);
        let mut out = Out::default();
        r.write(b"hello world, a long line of text", &mut out)
            .unwrap();
        assert_eq!(r.held(), 9);
        r.finish(&mut out).unwrap();
        assert_eq!(r.held(), 0);
        assert_eq!(out.0, b"hello world, a long line of text");
    }

    #[test]
    fn oversized_secret_is_matched_in_pieces() {
        let secret = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ".to_vec(); // 26 > HOLD + 1 = 9
        let secrets = [secret.clone()];
        let mut text = b"pre ".to_vec();
        text.extend_from_slice(&secret);
        text.extend_from_slice(b" post");
        for cut in 0..=text.len() {
            let got = streamed::<8>(&text, &secrets, &[cut]);
            assert_eq!(got, b"pre [REDACTED] post", "cut {cut}");
        }
        let cuts: Vec<usize> = (0..text.len()).collect();
        assert_eq!(
            streamed::<8>(&text, &secrets, &cuts),
            b"pre [REDACTED] post"
        );
    }

    #[test]
    fn redacting_sink_writes_through() {
        let secrets = ["tok_ABCDEFGH"];
        let mut r = Redactor::new(&secrets);
        let mut storage = [0u8; 64];
        let mut buf = SliceBuf::new(&mut storage);
        {
            let mut s = r.sink(&mut buf);
            s.put(b"auth: tok_AB").unwrap();
            s.put(b"CDEFGH done").unwrap();
            s.finish().unwrap();
        }
        assert_eq!(buf.bytes(), b"auth: [REDACTED] done");
    }

    #[test]
    fn overflow_poisons() {
        let secrets = ["abcd"];
        let mut r = Redactor::new(&secrets);
        let mut storage = [0u8; 4];
        let mut buf = SliceBuf::new(&mut storage);
        assert!(r.write(b"0123456789", &mut buf).is_err());
        assert!(r.write(b"x", &mut buf).is_err());
        assert!(r.finish(&mut buf).is_err());
        r.reset();
        let mut out = Out::default();
        r.write(b"ok", &mut out).unwrap();
        r.finish(&mut out).unwrap();
        assert_eq!(out.0, b"ok");
    }

    #[test]
    fn redacted_debug_and_display() {
        let v = Redacted("Bearer abc.def");
        assert_eq!(std::format!("{v:?} {v}"), "[REDACTED] [REDACTED]");
    }

    #[test]
    fn many_first_bytes_use_the_table() {
        let secrets = ["aaaa1", "bbbb2", "cccc3", "dddd4", "eeee5"];
        assert_eq!(
            once("x aaaa1 bbbb2 cccc3 dddd4 eeee5 y", &secrets),
            "x [REDACTED] [REDACTED] [REDACTED] [REDACTED] [REDACTED] y"
        );
    }

    #[test]
    fn sink_stages_small_puts_and_passes_large_ones() {
        // Puts of 1, 7, STAGE - 1, STAGE and 3 * STAGE bytes, in turn, with secrets across
        // every kind of boundary: the output equals the one-shot rule.
        let secrets = [b"ghp_secretTOKEN1".to_vec(), b"pass-word-22".to_vec()];
        let mut text = Vec::new();
        for i in 0..400 {
            text.extend_from_slice(format!("line {i} of output ").as_bytes());
            if i % 9 == 0 {
                text.extend_from_slice(&secrets[i % 2]);
            }
        }
        let mut want = Out::default();
        redact(&text, &secrets, &mut want).unwrap();
        let mut r = Redactor::new(&secrets);
        let mut sink = r.sink(Out::default());
        let sizes = [1, 7, STAGE - 1, STAGE, 3 * STAGE];
        let mut at = 0;
        for n in sizes.iter().cycle() {
            if at >= text.len() {
                break;
            }
            let end = (at + n).min(text.len());
            sink.put(&text[at..end]).unwrap();
            at = end;
        }
        assert_eq!(sink.finish().unwrap().0, want.0);
        // An overflow behind staged bytes is reported at the latest by `finish`.
        let mut storage = [0u8; 16];
        let mut r = Redactor::new(&secrets);
        let mut sink = r.sink(SliceBuf::new(&mut storage));
        let _ = sink.put(&text[..100]);
        assert!(sink.finish().is_err());
    }

    #[test]
    fn anchors_deep_in_the_secret_and_many_anchor_values() {
        // Anchors at offsets 0..15 (the rare byte is placed at each), and then more distinct
        // anchor values than the memchr3 groups hold (the table scan): whole, streamed byte by
        // byte, and cut every 7 bytes, the output equals the one-shot naive rule.
        let many = b"#!@$%^&*~|;?<>[]{}";
        // 1..=16 leading pairs take the pair search; 17 and 18 the anchors: 17 or 18 distinct
        // anchor values (the table scan), or two (memchr3 groups).
        for (count, rare) in [
            (1usize, &many[..]),
            (4, many),
            (13, many),
            (16, many),
            (17, many),
            (18, many),
            (18, b"#!"),
        ] {
            let secrets: Vec<Vec<u8>> = (0..count)
                .map(|i| {
                    let mut s = b"aKcretvalue_xyz0".to_vec();
                    s[0] = b'a' + i as u8;
                    s[i % ANCHOR_WINDOW] = rare[i % rare.len()];
                    s.extend_from_slice(format!("{i:02}").as_bytes());
                    s
                })
                .collect();
            let a = first_bytes(&Patterns {
                secrets: &secrets,
                piece: usize::MAX,
            })
            .0;
            // The edge (no `std`) keeps no pairs: its one search looks at first bytes.
            assert_eq!(
                a.by_pairs(),
                !cfg!(feature = "std") || count <= PAIRS,
                "{count} secrets"
            );
            // Over MAX_FINDERS patterns the anchor search does all the work.
            let pats = Patterns {
                secrets: &secrets,
                piece: usize::MAX,
            };
            let mut f = Finders::new(&pats);
            assert!(!f.active(), "nothing is built before a big write");
            f.prepare(&pats, FINDERS_FROM);
            let simd = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));
            assert_eq!(f.active(), simd && count <= MAX_FINDERS, "{count} secrets");
            let mut text = b"lead ".to_vec();
            for (i, s) in secrets.iter().enumerate() {
                text.extend_from_slice(b"words ");
                text.extend_from_slice(s);
                if i % 2 == 0 {
                    // Adjacent occurrences merge into one marker.
                    text.extend_from_slice(s);
                }
                text.extend_from_slice(&s[..s.len() - 1]);
            }
            let whole = {
                let mut out = Out::default();
                redact(&text, &secrets, &mut out).unwrap();
                out.0
            };
            let mut want = String::from_utf8(text.clone()).unwrap();
            for s in &secrets {
                let s = String::from_utf8(s.clone()).unwrap();
                want = want.replace(&format!("{s}{s}"), MARKER).replace(&s, MARKER);
            }
            assert_eq!(String::from_utf8(whole).unwrap(), want, "{count} secrets");
            let bytewise: Vec<usize> = (0..text.len()).collect();
            let sevens: Vec<usize> = (0..text.len()).step_by(7).collect();
            assert_eq!(streamed::<64>(&text, &secrets, &bytewise), want.as_bytes());
            assert_eq!(streamed::<64>(&text, &secrets, &sevens), want.as_bytes());
        }
    }

    std::thread_local! {
        pub(super) static EXAMINED: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
    }

    #[test]
    fn every_position_is_examined_once() {
        // Every byte is a candidate (first byte of the secret); fed byte by byte, each position
        // must still be matched exactly once, not once per write.
        let secrets = [b"aaaaaaab".to_vec()];
        let text = std::vec![b'a'; 5_000];
        EXAMINED.with(|c| c.set(0));
        let cuts: Vec<usize> = (0..text.len()).collect();
        assert_eq!(streamed::<16>(&text, &secrets, &cuts), text);
        // The last byte has no second byte after it, so it cannot start a secret: every other
        // position is examined, once.
        assert_eq!(EXAMINED.with(|c| c.get()), text.len() - 1);
        // No first byte occurs: memchr skips everything, nothing is examined.
        EXAMINED.with(|c| c.set(0));
        let plain = "b".repeat(100_000);
        assert_eq!(once(&plain, &["zzzzzz", "yyyyyy"]), plain);
        assert_eq!(EXAMINED.with(|c| c.get()), 0);
    }

    // Alphabet disjoint from the marker's characters `[REDACT]`.
    fn text_strategy() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(proptest::sample::select(b"abcxyz01 \n".to_vec()), 0..200)
    }
    fn secret_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
        proptest::collection::vec(
            proptest::collection::vec(proptest::sample::select(b"abcxyz01".to_vec()), 1..9),
            0..5,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn streaming_equals_reference(
            text in text_strategy(),
            secrets in secret_strategy(),
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            // Plant secrets so matches are common.
            let mut text = text;
            for (i, s) in secrets.iter().enumerate() {
                let at = (i * 37) % (text.len() + 1);
                text.splice(at..at, s.iter().copied());
            }
            let mut cuts = cuts;
            cuts.sort_unstable();
            let want = reference(&text, &secrets);
            let mut whole = Out::default();
            redact(&text, &secrets, &mut whole).unwrap();
            prop_assert_eq!(&whole.0, &want);
            let got = streamed::<16>(&text, &secrets, &cuts);
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(&streamed_by::<16>(&text, &secrets, &cuts, false), &want);
            for s in secrets.iter().filter(|s| s.len() >= MIN_SECRET_LEN) {
                prop_assert!(!got.windows(s.len()).any(|w| w == s.as_slice()));
            }
        }

        #[test]
        fn text_without_secrets_is_unchanged(
            text in proptest::collection::vec(proptest::sample::select(b"abc \n".to_vec()), 0..300),
            secrets in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(b"xyz01".to_vec()), 4..9), 0..4),
            cuts in proptest::collection::vec(0usize..300, 0..8),
        ) {
            let mut cuts = cuts;
            cuts.sort_unstable();
            prop_assert_eq!(streamed::<16>(&text, &secrets, &cuts), text);
        }

        #[test]
        fn oversized_secrets_never_survive(
            text in text_strategy(),
            secrets in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(b"abcxyz01".to_vec()), 4..14), 1..4),
            cuts in proptest::collection::vec(0usize..250, 0..8),
        ) {
            // HOLD = 4: every secret over 5 bytes is matched in pieces.
            let mut text = text;
            for (i, s) in secrets.iter().enumerate() {
                let at = (i * 53) % (text.len() + 1);
                text.splice(at..at, s.iter().copied());
            }
            let mut cuts = cuts;
            cuts.sort_unstable();
            let got = streamed::<4>(&text, &secrets, &cuts);
            for s in &secrets {
                prop_assert!(!got.windows(s.len()).any(|w| w == s.as_slice()));
            }
        }

        /// Texts of a few KiB in big writes: the packed searcher (host) is built and finds
        /// exactly what the per-pattern finders and the reference find.
        #[test]
        fn packed_searcher_equals_finders_and_reference(
            text in text_strategy(),
            repeat in 4usize..24,
            secrets in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(b"abcxyz01".to_vec()), 4..12), 1..6),
            cuts in proptest::collection::vec(0usize..8000, 0..4),
        ) {
            let mut big = Vec::new();
            for i in 0..repeat {
                big.extend_from_slice(&text);
                let s = &secrets[i % secrets.len()];
                // Whole, and cut short: the tail must stay.
                big.extend_from_slice(if i % 3 == 2 { &s[..s.len() - 1] } else { s });
            }
            let mut cuts = cuts;
            cuts.sort_unstable();
            let want = reference(&big, &secrets);
            let (got, built) = streamed_packed::<64>(&big, &secrets, &cuts);
            prop_assert_eq!(&got, &want);
            let mut r: Redactor<'_, Vec<u8>, 64> = Redactor::with_hold(&secrets);
            r.finders.without_packed();
            let mut out = Out::default();
            r.write(&big, &mut out).unwrap();
            r.finish(&mut out).unwrap();
            prop_assert_eq!(&out.0, &want);
            let mut whole = Out::default();
            redact(&big, &secrets, &mut whole).unwrap();
            prop_assert_eq!(&whole.0, &want);
            // On the host the big writes did go through the packed searcher.
            let host = cfg!(all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64")));
            let big_write = cuts.iter().chain([&big.len()]).fold((0, false), |(at, seen), &c| {
                let c = c.min(big.len()).max(at);
                (c, seen || c - at >= PACKED_FROM)
            }).1;
            prop_assert_eq!(built, host && big_write);
        }

        #[test]
        fn byte_by_byte_equals_reference(text in text_strategy(), secrets in secret_strategy()) {
            let cuts: Vec<usize> = (0..text.len()).collect();
            prop_assert_eq!(streamed::<16>(&text, &secrets, &cuts), reference(&text, &secrets));
            prop_assert_eq!(
                streamed_by::<16>(&text, &secrets, &cuts, false),
                reference(&text, &secrets)
            );
        }
    }

    fn form(secret: &[u8], f: JsonForm) -> Vec<u8> {
        let mut out = Out::default();
        write_json_form(secret, f, &mut out).unwrap();
        out.0
    }

    /// A secret and every JSON form of it that differs (what the host hands the redactor).
    fn with_forms(secret: &[u8]) -> Vec<Vec<u8>> {
        let mut all = std::vec![secret.to_vec()];
        for f in JsonForm::ALL {
            let v = form(secret, f);
            if json_form_differs(secret, f) && !all.contains(&v) {
                all.push(v);
            }
        }
        all
    }

    #[test]
    fn json_forms_are_what_encoders_write() {
        let s = "pa\"ss\\word-12345";
        assert_eq!(form(s.as_bytes(), JsonForm::Once), br#"pa\"ss\\word-12345"#);
        assert_eq!(
            form(s.as_bytes(), JsonForm::Twice),
            br#"pa\\\"ss\\\\word-12345"#
        );
        assert_eq!(
            form("ä\n\u{1}😀".as_bytes(), JsonForm::OnceAscii),
            br"\u00e4\n\u0001\ud83d\ude00"
        );
        assert_eq!(
            form("ä\u{1}".as_bytes(), JsonForm::TwiceAscii),
            br"\\u00e4\\u0001"
        );
        assert_eq!(form("ä".as_bytes(), JsonForm::Once), "ä".as_bytes());
        assert!(!json_form_differs(b"plain-secret", JsonForm::TwiceAscii));
        assert!(!json_form_differs("pässword".as_bytes(), JsonForm::Once));
        assert!(json_form_differs(
            "pässword".as_bytes(),
            JsonForm::OnceAscii
        ));
        // Not UTF-8: the byte as it is, the rest escaped.
        assert_eq!(form(b"a\xff\"b", JsonForm::Once), b"a\xff\\\"b");
    }

    #[test]
    fn a_secret_in_tool_json_and_in_the_reply_around_it_is_redacted_at_every_split() {
        let secret = "pa\"ss\\word-12345";
        let secrets = with_forms(secret.as_bytes());
        // The tool's text (Kali style), then that text inside a JSON-RPC reply (a -v body).
        let tool_text = serde_json::json!({ "stdout": format!("x {secret} y") }).to_string();
        let reply = serde_json::json!({ "result": { "content": [{ "text": tool_text }],
            "structuredContent": { "stdout": secret } } })
        .to_string();
        for text in [tool_text.as_bytes(), reply.as_bytes()] {
            let whole = {
                let mut out = Out::default();
                redact(text, &secrets, &mut out).unwrap();
                out.0
            };
            for s in &secrets {
                assert!(
                    !whole.windows(s.len()).any(|w| w == &s[..]),
                    "{:?} left in {}",
                    String::from_utf8_lossy(s),
                    String::from_utf8_lossy(&whole)
                );
            }
            assert_eq!(whole, reference(text, &secrets));
            for cut in 0..=text.len() {
                let mut r = Redactor::new(&secrets);
                let mut out = Out::default();
                r.write(&text[..cut], &mut out).unwrap();
                r.write(&text[cut..], &mut out).unwrap();
                r.finish(&mut out).unwrap();
                assert_eq!(out.0, whole, "split at {cut}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// The `Once` form is what serde_json writes inside a string; every form of a secret
        /// is redacted in any chunking.
        #[test]
        fn json_forms_match_an_encoder_and_redact_in_any_chunking(
            secret in "[a\"\\\\\n\u{1}ä😀]{2,6}[a-z]{2}",
            lead in "[ a\"\\\\]{0,6}",
            cuts in proptest::collection::vec(0usize..80, 0..4),
        ) {
            let enc = serde_json::to_string(&secret).unwrap();
            prop_assert_eq!(form(secret.as_bytes(), JsonForm::Once), &enc.as_bytes()[1..enc.len() - 1]);
            let secrets = with_forms(secret.as_bytes());
            let mut text = lead.clone().into_bytes();
            for s in &secrets {
                text.extend_from_slice(s);
                text.extend_from_slice(b" | ");
            }
            let want = reference(&text, &secrets);
            let mut cuts = cuts;
            cuts.push(text.len());
            cuts.iter_mut().for_each(|c| *c = (*c).min(text.len()));
            cuts.sort_unstable();
            let mut r = Redactor::new(&secrets);
            let mut out = Out::default();
            let mut at = 0;
            for c in cuts {
                r.write(&text[at..c], &mut out).unwrap();
                at = c;
            }
            r.finish(&mut out).unwrap();
            prop_assert_eq!(&out.0, &want);
            for s in &secrets {
                prop_assert!(!out.0.windows(s.len()).any(|w| w == &s[..]));
            }
        }
    }
}
