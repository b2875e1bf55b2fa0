//! `LoopbackHook`: the authorization step for a person at a terminal. It shows the
//! authorization URL (through the caller's `prompt`) and waits on a loopback listener for the
//! browser's redirect (RFC 8252 section 7.3), then answers the browser with a short page.
//!
//! Owns: the listener and reading one redirect request. The flow has already tried the URL
//! itself (an auto-approving server redirects at once) before a person is asked.

use std::future::Future;
use std::io;
use std::net::TcpListener;
use std::pin::Pin;
use std::time::Duration;

use async_io::{Async, Timer};
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};

use super::{AuthorizeHook, AuthorizeRequest};

/// Largest redirect request head read.
const MAX_REQUEST: usize = 16 * 1024;
/// How long one browser connection may take to send its request.
const PER_CONNECTION: Duration = Duration::from_secs(10);

/// Waits for the redirect on `http://127.0.0.1:PORT/callback`.
pub struct LoopbackHook {
    listener: Async<TcpListener>,
    port: u16,
    prompt: Box<dyn Fn(&str) + Send + Sync>,
}

impl LoopbackHook {
    /// Listens on a free loopback port; `prompt` is given the URL a person must open.
    pub fn bind(prompt: impl Fn(&str) + Send + Sync + 'static) -> io::Result<LoopbackHook> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let port = listener.local_addr()?.port();
        Ok(LoopbackHook {
            listener: Async::new(listener)?,
            port,
            prompt: Box::new(prompt),
        })
    }

    /// The request target of one connection, if it is a GET (answered with `page`).
    async fn one(&self) -> io::Result<Option<String>> {
        let (mut s, _) = self.listener.accept().await?;
        let read = async {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).await?;
                if n == 0 || head.len() + n > MAX_REQUEST {
                    return Ok::<_, io::Error>(None);
                }
                head.extend_from_slice(&buf[..n]);
            }
            let line = String::from_utf8_lossy(&head)
                .lines()
                .next()
                .unwrap_or("")
                .to_owned();
            let mut parts = line.split(' ');
            match (parts.next(), parts.next()) {
                (Some("GET"), Some(target)) => Ok(Some(target.to_owned())),
                _ => Ok(None),
            }
        };
        let target = futures_lite::future::or(read, async {
            Timer::after(PER_CONNECTION).await;
            Ok(None)
        })
        .await?;
        let (status, body) = match &target {
            Some(t) if t.starts_with("/callback") => (
                "200 OK",
                "Authorized. You can close this window and go back to the terminal.",
            ),
            _ => ("404 Not Found", "Not the authorization redirect."),
        };
        let _ = s
            .write_all(
                format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .await;
        Ok(target.filter(|t| t.starts_with("/callback")))
    }
}

impl AuthorizeHook for LoopbackHook {
    fn authorize<'a>(
        &'a self,
        req: &'a AuthorizeRequest,
    ) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>> {
        Box::pin(async move {
            (self.prompt)(&req.url);
            loop {
                match self.one().await {
                    Ok(Some(target)) => {
                        return Ok(format!("http://127.0.0.1:{}{target}", self.port));
                    }
                    Ok(None) => continue,
                    Err(e) => return Err(format!("loopback listener: {e}")),
                }
            }
        })
    }

    fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }
}
