//! TCP through the proxy in explicit mode: a per-port TCP listener to its
//! cluster, passthrough to the original destination, and blackhole.

use meshperf_proxy::proxy::Reporter;
use meshperf_proxy::state::*;

use crate::support::*;

#[tokio::test]
async fn tcp_listener_passthrough_and_blackhole() {
    let echo = tcp_echo().await;
    let clusters = [cluster("outbound|9000||echo", &[echo]), cluster("BlackHoleCluster", &[]), passthrough_cluster()];
    let listeners = [
        virtual_outbound("virtualOutbound", "PassthroughCluster"),
        // REGISTRY_ONLY: unknown destinations go nowhere.
        virtual_outbound("blackholeOutbound", "BlackHoleCluster"),
        listener(
            "0.0.0.0_9000",
            ListenerKind::Outbound,
            9000,
            vec![tcp_chain("9000", Some(9000), "outbound|9000||echo")],
            None,
        ),
    ];
    let p = start(
        snapshot(clusters, listeners),
        vec![
            named("virtualOutbound", 9000),
            // No per-port listener for the echo server's own port: passthrough to 127.0.0.1:PORT.
            named("virtualOutbound", echo.port()),
            named("blackholeOutbound", echo.port()),
            named("0.0.0.0_9000", 9000),
        ],
    )
    .await;
    let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();

    assert_eq!(tcp_roundtrip(p.addrs[0], &data).await.unwrap(), data, "port 9000 via virtualOutbound");
    assert_eq!(tcp_roundtrip(p.addrs[3], b"direct").await.unwrap(), b"direct", "named per-port listener");
    assert_eq!(tcp_roundtrip(p.addrs[1], b"passthrough").await.unwrap(), b"passthrough");
    let blackholed = tcp_roundtrip(p.addrs[2], b"nowhere").await;
    assert!(blackholed.as_deref().map_or(true, |b| b.is_empty()), "{blackholed:?}");

    let reports = p.recorder.tcp_reports(4).await;
    let echo_report = reports.iter().find(|r| r.received_bytes == data.len() as u64).expect("the big echo");
    assert_eq!((echo_report.sent_bytes, echo_report.cluster.as_str()), (data.len() as u64, "outbound|9000||echo"));
    assert_eq!(echo_report.reporter, Reporter::Source);
    assert_eq!(echo_report.destination_service.as_deref(), Some("echo"));
    let hole = reports.iter().find(|r| r.cluster == "BlackHoleCluster").expect("blackhole report");
    assert_eq!(hole.response_flags, "UH");
    let pass = reports.iter().find(|r| r.cluster == "PassthroughCluster").expect("passthrough report");
    assert_eq!(pass.upstream, Some(echo));
}
