//! ZDS over a real SOCK_SEQPACKET pair with a real network namespace fd (the
//! test's own, from /proc/self/ns/net): the hello, an Ack per request, the fd
//! arriving as SCM_RIGHTS, Keep/Del/SnapshotSent, and the netns entered to
//! make a marked socket.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;

use nix::sys::socket::{self as sock, AddressFamily, SockFlag, SockType};
use prost::Message;

use super::*;
use crate::proto::zds::{self, workload_request::Payload};

#[derive(Default)]
struct Recorder {
    pods: Mutex<Vec<String>>,
    /// What each Add's fd pointed at (`net:[inode]`).
    namespaces: Mutex<Vec<String>>,
    synced: Mutex<bool>,
}

impl PodRegistry for Recorder {
    fn add(&self, uid: &str, info: Option<zds::WorkloadInfo>, netns: Netns) -> Result<(), String> {
        if info.as_ref().is_some_and(|i| i.name == "broken") {
            return Err("cannot listen".into());
        }
        let link = std::fs::read_link(format!("/proc/self/fd/{}", netns.fd.as_raw_fd())).map_err(|e| e.to_string())?;
        self.namespaces.lock().unwrap().push(link.display().to_string());
        self.pods.lock().unwrap().push(uid.to_string());
        Ok(())
    }
    fn remove(&self, uid: &str) {
        self.pods.lock().unwrap().retain(|p| p != uid);
    }
    fn uids(&self) -> Vec<String> {
        self.pods.lock().unwrap().clone()
    }
    fn set_synced(&self, synced: bool) {
        *self.synced.lock().unwrap() = synced;
    }
}

fn pair() -> (ZdsConnection, ZdsConnection) {
    let (a, b) = sock::socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
    )
    .unwrap();
    (ZdsConnection::from_fd(a).unwrap(), ZdsConnection::from_fd(b).unwrap())
}

fn add(uid: &str, name: &str) -> zds::WorkloadRequest {
    zds::WorkloadRequest {
        payload: Some(Payload::Add(zds::AddWorkload {
            uid: uid.into(),
            workload_info: Some(zds::WorkloadInfo {
                name: name.into(),
                namespace: "shop".into(),
                service_account: "web".into(),
            }),
        })),
    }
}

async fn ack(cni: &ZdsConnection) -> String {
    let (buf, fd) = cni.recv_raw().await.unwrap();
    assert!(fd.is_none());
    match zds::WorkloadResponse::decode(buf.as_slice()).unwrap().payload {
        Some(zds::workload_response::Payload::Ack(a)) => a.error,
        None => panic!("a response without an Ack"),
    }
}

#[tokio::test]
async fn zds_session_acks_each_request_and_receives_the_netns_fd() {
    let (proxy, cni) = pair();
    let pods = std::sync::Arc::new(Recorder::default());
    let registry = pods.clone();
    let session = tokio::spawn(async move { serve(&proxy, registry.as_ref()).await });

    let (hello, _) = cni.recv_raw().await.unwrap();
    assert_eq!(zds::ZdsHello::decode(hello.as_slice()).unwrap().version, zds::Version::V1 as i32);

    let own = OwnedFd::from(std::fs::File::open("/proc/self/ns/net").unwrap());
    let own_link = std::fs::read_link("/proc/self/ns/net").unwrap().display().to_string();
    for uid in ["Kubernetes//Pod/shop/a", "Kubernetes//Pod/shop/b"] {
        cni.send(&add(uid, "ok"), Some(own.as_raw_fd())).await.unwrap();
        assert_eq!(ack(&cni).await, "");
    }
    assert_eq!(*pods.namespaces.lock().unwrap(), [own_link.clone(), own_link]);

    // An Add without its fd, and one the registry fails: errors in the Ack.
    cni.send(&add("Kubernetes//Pod/shop/c", "ok"), None).await.unwrap();
    assert!(ack(&cni).await.contains("no network namespace fd"));
    cni.send(&add("Kubernetes//Pod/shop/d", "broken"), Some(own.as_raw_fd())).await.unwrap();
    assert!(ack(&cni).await.contains("cannot listen"));

    // Del removes; a new session's snapshot keeps what was re-sent.
    let del =
        zds::WorkloadRequest { payload: Some(Payload::Del(zds::DelWorkload { uid: "Kubernetes//Pod/shop/a".into() })) };
    cni.send(&del, None).await.unwrap();
    assert_eq!(ack(&cni).await, "");
    assert_eq!(pods.uids(), ["Kubernetes//Pod/shop/b"]);
    drop(cni);
    assert!(matches!(session.await.unwrap(), Err(InpodError::Closed)), "the CNI closing ends the session");

    let (proxy, cni) = pair();
    pods.add(
        "Kubernetes//Pod/shop/stale",
        None,
        Netns::new(OwnedFd::from(std::fs::File::open("/proc/self/ns/net").unwrap())),
    )
    .unwrap();
    let registry = pods.clone();
    let session = tokio::spawn(async move { serve(&proxy, registry.as_ref()).await });
    cni.recv_raw().await.unwrap();
    let keep = zds::WorkloadRequest {
        payload: Some(Payload::Keep(zds::KeepWorkload { uid: "Kubernetes//Pod/shop/b".into() })),
    };
    cni.send(&keep, None).await.unwrap();
    assert_eq!(ack(&cni).await, "");
    let unknown = zds::WorkloadRequest { payload: Some(Payload::Keep(zds::KeepWorkload { uid: "nope".into() })) };
    cni.send(&unknown, None).await.unwrap();
    assert!(ack(&cni).await.contains("not a pod"));
    assert!(!*pods.synced.lock().unwrap());
    cni.send(&zds::WorkloadRequest { payload: Some(Payload::SnapshotSent(zds::SnapshotSent {})) }, None).await.unwrap();
    assert_eq!(ack(&cni).await, "");
    assert_eq!(pods.uids(), ["Kubernetes//Pod/shop/b"], "the pod not in the snapshot is removed");
    assert!(*pods.synced.lock().unwrap());
    session.abort();
}

#[tokio::test]
async fn sockets_made_in_a_netns_carry_the_mark() {
    let netns = Netns::new(OwnedFd::from(std::fs::File::open("/proc/self/ns/net").unwrap()));
    match netns.tcp_socket(true) {
        Ok(s) => assert_eq!(sock::getsockopt(&s, sock::sockopt::Mark).unwrap(), SOCKET_MARK),
        // Without CAP_SYS_ADMIN / CAP_NET_ADMIN there is nothing to check.
        Err(e) if e.raw_os_error() == Some(nix::libc::EPERM) => eprintln!("skipped: {e} (needs root)"),
        Err(e) => panic!("{e}"),
    }
}
