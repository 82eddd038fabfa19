//! In-pod operation, as istio-cni and ztunnel do it: the CNI hands the node
//! proxy each ambient pod's network namespace over a Unix socket (ZDS,
//! SOCK_SEQPACKET, one protobuf message per packet, the netns fd as
//! SCM_RIGHTS), and the node proxy opens that pod's listeners inside it.
//!
//! [`Netns`] enters a pod's namespace on the calling thread just long enough
//! to create a socket, then returns to the node's: a socket stays in the
//! namespace it was created in, so the thread can go back at once. ztunnel
//! does the same; a dedicated thread per pod would add a thread hop to every
//! outbound connection. Every socket made there carries mark 0x539, which the
//! pod's redirection rules let through.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use nix::sched::{CloneFlags, setns};
use nix::sys::socket::{self as sock, ControlMessage, ControlMessageOwned, MsgFlags};
use prost::Message;
use tokio::io::unix::AsyncFd;
use tokio::net::TcpSocket;

use crate::proto::zds;

/// The mark on every socket the node proxy makes in a pod (ztunnel's).
pub const SOCKET_MARK: u32 = 0x539;

/// Largest ZDS message: a few names and a uid.
const MAX_MESSAGE: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum InpodError {
    #[error("cannot reach the CNI's socket {path}: {source}")]
    Connect { path: String, source: io::Error },
    #[error("ZDS socket: {0}")]
    Io(#[from] io::Error),
    #[error("ZDS: cannot decode a message: {0}")]
    Decode(#[from] prost::DecodeError),
    #[error("ZDS: the CNI closed the socket")]
    Closed,
}

/// A pod's network namespace, held open by its fd.
#[derive(Debug)]
pub struct Netns {
    fd: OwnedFd,
}

/// The node proxy's own namespace, opened once at the first use.
fn node_netns() -> io::Result<&'static OwnedFd> {
    static NODE: OnceLock<OwnedFd> = OnceLock::new();
    if let Some(fd) = NODE.get() {
        return Ok(fd);
    }
    let fd = OwnedFd::from(std::fs::File::open("/proc/self/ns/net")?);
    Ok(NODE.get_or_init(|| fd))
}

impl Netns {
    pub fn new(fd: OwnedFd) -> Netns {
        Netns { fd }
    }

    /// Runs `f` (which must not block or await) inside this namespace on the
    /// calling thread, then returns the thread to the node's namespace.
    pub fn run<T>(&self, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let node = node_netns()?;
        setns(self.fd.as_fd(), CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
        let result = f();
        if let Err(e) = setns(node.as_fd(), CloneFlags::CLONE_NEWNET) {
            // A worker thread left in a pod's namespace would make every
            // later socket there: nothing safe remains to do.
            panic!("cannot return to the node's network namespace: {e}");
        }
        result
    }

    /// A TCP socket in this namespace, with the mark.
    pub fn tcp_socket(&self, v4: bool) -> io::Result<TcpSocket> {
        self.run(|| {
            let s = if v4 { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
            sock::setsockopt(&s, sock::sockopt::Mark, &SOCKET_MARK).map_err(io::Error::from)?;
            Ok(s)
        })
    }
}

/// One request from the CNI, with the pod's netns fd for an Add.
#[derive(Debug)]
pub struct ZdsRequest {
    pub request: zds::WorkloadRequest,
    pub netns: Option<OwnedFd>,
}

/// A connected ZDS socket.
pub struct ZdsConnection {
    fd: AsyncFd<OwnedFd>,
}

impl ZdsConnection {
    /// Connects to the CNI's socket.
    pub fn connect(path: &Path) -> Result<ZdsConnection, InpodError> {
        let err = |source: io::Error| InpodError::Connect { path: path.display().to_string(), source };
        let fd = sock::socket(
            sock::AddressFamily::Unix,
            sock::SockType::SeqPacket,
            sock::SockFlag::SOCK_CLOEXEC | sock::SockFlag::SOCK_NONBLOCK,
            None,
        )
        .map_err(|e| err(e.into()))?;
        let addr = sock::UnixAddr::new(path).map_err(|e| err(e.into()))?;
        sock::connect(fd.as_raw_fd(), &addr).map_err(|e| err(e.into()))?;
        Ok(ZdsConnection { fd: register(fd).map_err(err)? })
    }

    /// Wraps one end of a connected SOCK_SEQPACKET pair (tests, and a CNI
    /// side in the same process).
    pub fn from_fd(fd: OwnedFd) -> io::Result<ZdsConnection> {
        Ok(ZdsConnection { fd: register(fd)? })
    }

    pub async fn send(&self, msg: &impl Message, fd: Option<RawFd>) -> Result<(), InpodError> {
        let bytes = msg.encode_to_vec();
        let fds: Vec<RawFd> = fd.into_iter().collect();
        loop {
            let mut guard = self.fd.writable().await?;
            let cmsgs: Vec<ControlMessage> =
                if fds.is_empty() { Vec::new() } else { vec![ControlMessage::ScmRights(&fds)] };
            let sent = guard.try_io(|fd| {
                sock::sendmsg::<()>(fd.as_raw_fd(), &[IoSlice::new(&bytes)], &cmsgs, MsgFlags::empty(), None)
                    .map_err(io::Error::from)
            });
            match sent {
                Ok(r) => return r.map(|_| ()).map_err(InpodError::Io),
                Err(_would_block) => continue,
            }
        }
    }

    /// Receives one message and the fd that came with it.
    pub async fn recv_raw(&self) -> Result<(Vec<u8>, Option<OwnedFd>), InpodError> {
        loop {
            let mut guard = self.fd.readable().await?;
            let got = guard.try_io(|fd| {
                let mut buf = vec![0u8; MAX_MESSAGE];
                let mut cmsg = nix::cmsg_space!([RawFd; 2]);
                let (len, fds) = {
                    let mut iov = [IoSliceMut::new(&mut buf)];
                    let msg =
                        sock::recvmsg::<()>(fd.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC)
                            .map_err(io::Error::from)?;
                    let mut fds = Vec::new();
                    for c in msg.cmsgs().map_err(io::Error::from)? {
                        if let ControlMessageOwned::ScmRights(received) = c {
                            fds.extend(received.into_iter().map(owned_fd));
                        }
                    }
                    (msg.bytes, fds)
                };
                buf.truncate(len);
                Ok((buf, fds))
            });
            match got {
                Ok(Ok((buf, _))) if buf.is_empty() => return Err(InpodError::Closed),
                Ok(Ok((buf, mut fds))) => {
                    // More than one fd is not ZDS: the extra ones close on drop.
                    let fd = if fds.is_empty() { None } else { Some(fds.swap_remove(0)) };
                    return Ok((buf, fd));
                }
                Ok(Err(e)) => return Err(InpodError::Io(e)),
                Err(_would_block) => continue,
            }
        }
    }

    pub async fn recv(&self) -> Result<ZdsRequest, InpodError> {
        let (buf, netns) = self.recv_raw().await?;
        Ok(ZdsRequest { request: zds::WorkloadRequest::decode(buf.as_slice())?, netns })
    }
}

/// Registers the socket with the runtime's reactor.
#[allow(unsafe_code)]
fn register(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd keeps its one fd open, unchanged, until AsyncFd
    // drops it (after deregistering), which is what register asks.
    unsafe { AsyncFd::register(fd) }.map_err(|e| e.into_parts().1)
}

/// Takes ownership of an fd the kernel just installed in this process for
/// an SCM_RIGHTS message.
#[allow(unsafe_code)]
fn owned_fd(fd: RawFd) -> OwnedFd {
    // SAFETY: recvmsg has just created `fd` in our table for this message;
    // nothing else knows of it, so this is its only owner.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// What the node proxy does with the CNI's requests; the answer of each is
/// the Ack's error (empty when it worked).
pub trait PodRegistry: Send + Sync {
    /// A pod to serve: open its listeners in `netns`.
    fn add(&self, uid: &str, info: Option<zds::WorkloadInfo>, netns: Netns) -> Result<(), String>;
    /// A pod gone: close its listeners.
    fn remove(&self, uid: &str);
    /// The pods served now.
    fn uids(&self) -> Vec<String>;
    /// Whether every pod handed over has its listeners (readiness).
    fn set_synced(&self, synced: bool);
}

/// Talks ZDS with the CNI until the socket closes, then reconnects (with a
/// pause), keeping the pods it has: a restarted CNI re-sends them and
/// `SnapshotSent` drops the ones it no longer has.
pub async fn run(path: std::path::PathBuf, pods: Arc<dyn PodRegistry>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let session = async {
            let conn = ZdsConnection::connect(&path)?;
            serve(&conn, pods.as_ref()).await
        };
        let result = tokio::select! {
            r = session => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        match result {
            Ok(()) | Err(InpodError::Closed) => {
                tracing::warn!(path = %path.display(), "ZDS: the CNI closed its socket; reconnecting")
            }
            Err(e) => tracing::warn!(error = %e, "ZDS: reconnecting"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// One ZDS session: hello, then each request answered with an Ack.
pub async fn serve(conn: &ZdsConnection, pods: &dyn PodRegistry) -> Result<(), InpodError> {
    conn.send(&zds::ZdsHello { version: zds::Version::V1 as i32 }, None).await?;
    tracing::info!("ZDS: connected to the CNI");
    // Pods re-sent (Add or Keep) since this session started; SnapshotSent
    // removes the others.
    let mut seen = std::collections::HashSet::new();
    loop {
        let ZdsRequest { request, netns } = conn.recv().await?;
        let error = handle(request, netns, pods, &mut seen);
        if !error.is_empty() {
            tracing::warn!(%error, "ZDS: request failed");
        }
        let ack = zds::WorkloadResponse { payload: Some(zds::workload_response::Payload::Ack(zds::Ack { error })) };
        conn.send(&ack, None).await?;
    }
}

fn handle(
    request: zds::WorkloadRequest,
    netns: Option<OwnedFd>,
    pods: &dyn PodRegistry,
    seen: &mut std::collections::HashSet<String>,
) -> String {
    use zds::workload_request::Payload;
    match request.payload {
        Some(Payload::Add(add)) => {
            let Some(fd) = netns else { return format!("add {}: no network namespace fd came with it", add.uid) };
            seen.insert(add.uid.clone());
            match pods.add(&add.uid, add.workload_info, Netns::new(fd)) {
                Ok(()) => String::new(),
                Err(e) => format!("add {}: {e}", add.uid),
            }
        }
        Some(Payload::Keep(keep)) => {
            if pods.uids().contains(&keep.uid) {
                seen.insert(keep.uid);
                String::new()
            } else {
                format!("keep {}: not a pod this proxy serves", keep.uid)
            }
        }
        Some(Payload::Del(del)) => {
            seen.remove(&del.uid);
            pods.remove(&del.uid);
            String::new()
        }
        Some(Payload::SnapshotSent(_)) => {
            for uid in pods.uids() {
                if !seen.contains(&uid) {
                    tracing::info!(%uid, "ZDS: pod not in the CNI's snapshot; removing");
                    pods.remove(&uid);
                }
            }
            pods.set_synced(true);
            String::new()
        }
        None => "an empty request".to_string(),
    }
}

#[cfg(test)]
#[path = "inpod_tests.rs"]
mod tests;
