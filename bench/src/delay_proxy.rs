//! Latency that looks like a cloud (issue 50): a TCP proxy on 127.0.0.1 that
//! forwards to an upstream address (the S3 gateway) and delays every byte a
//! client sends by a fixed time before the upstream sees it; the answers
//! come back unchanged. Each HTTP request thus reaches the server `delay`
//! later, once, however it is split into reads: a delay line (each read is
//! stamped when it arrives and forwarded at that stamp plus `delay`), not a
//! sleep per read, so a large PUT body pays the delay once and the
//! bandwidth stays the loopback's. Point `AWS_ENDPOINT_URL` at
//! [`DelayProxy::url`] and every client (the library, the CLI, Python) sees a
//! store that far away.
//!
//! Standard library threads only: three per connection (accept, the delayed
//! direction's reader and writer, the answers' copy). Shared by the benches
//! (`compare` with `RUNLOG_COMPARE_DELAY_MS`, the `delay_proxy` example) and
//! the remote tests (`tests/remote_support`, through `#[path]`).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The largest read forwarded as one piece.
const READ_BYTES: usize = 64 << 10;

/// A running proxy; dropping it stops accepting (open connections run on
/// until either side closes).
pub struct DelayProxy {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl DelayProxy {
    /// Listens on 127.0.0.1 (a free port) and forwards each connection to
    /// `upstream` (`host:port`), the client's bytes `delay` late.
    pub fn start(upstream: &str, delay: Duration) -> std::io::Result<DelayProxy> {
        let upstream: SocketAddr = upstream.to_socket_addrs()?.next().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("upstream {upstream:?} resolves to no address"),
            )
        })?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::Builder::new()
            .name("delay-proxy".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(client) = conn else { continue };
                    let _ = std::thread::Builder::new()
                        .name("delay-proxy-conn".into())
                        .spawn(move || serve(client, upstream, delay));
                }
            })?;
        Ok(DelayProxy { addr, stop })
    }

    /// `http://127.0.0.1:<port>`: the endpoint that reaches the upstream through the delay.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees `stop`.
        let _ = TcpStream::connect(self.addr);
    }
}

/// `host:port` of an `http://host:port[/...]` endpoint URL.
pub fn host_port(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("http://")?;
    let hp = rest.split('/').next()?;
    (!hp.is_empty()).then_some(hp)
}

/// One connection: the client's bytes through the delay line, the
/// upstream's straight back; each side's close passed on to the other.
fn serve(client: TcpStream, upstream: SocketAddr, delay: Duration) {
    let Ok(server) = TcpStream::connect(upstream) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (Ok(mut c_read), Ok(mut s_read)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let (mut c_write, mut s_write) = (client, server);
    // Answers: copied back as they come.
    let back = std::thread::spawn(move || {
        let _ = std::io::copy(&mut s_read, &mut c_write);
        let _ = c_write.shutdown(Shutdown::Write);
    });
    // Requests: stamped as they are read, written at the stamp plus `delay`.
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer = std::thread::spawn(move || {
        for (at, bytes) in rx {
            let due = at + delay;
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if bytes.is_empty() || s_write.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = s_write.shutdown(Shutdown::Write);
    });
    let mut buf = vec![0u8; READ_BYTES];
    loop {
        let n = c_read.read(&mut buf).unwrap_or(0);
        // An empty piece is the client's close, passed on after the delay too.
        if tx.send((Instant::now(), buf[..n].to_vec())).is_err() || n == 0 {
            break;
        }
    }
    drop(tx);
    let _ = writer.join();
    let _ = back.join();
}
