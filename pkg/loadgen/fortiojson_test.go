package loadgen_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/meshperf/meshperf/pkg/loadgen/grpcload"
	"github.com/meshperf/meshperf/pkg/loadgen/httpload"
	"github.com/meshperf/meshperf/pkg/loadgen/tcpload"
)

// Fortio's result fields, in the order Fortio 1.75 writes them. Istio's tooling
// and Fortio's report UI read these; ours must have every one, in this order,
// followed only by meshperf's additions.
var (
	fortioCommon = []string{"RunType", "Labels", "StartTime", "RequestedQPS", "RequestedDuration",
		"ActualQPS", "ActualDuration", "NumThreads", "Version", "DurationHistogram",
		"ErrorsDurationHistogram", "Exactly", "Jitter", "Uniform", "NoCatchUp", "RunID",
		"AccessLoggerInfo", "ID"}
	meshperfAdded = []string{"ServiceTimeHistogram", "SendDelayHistogram",
		"CoordinatedOmissionCorrected", "SkippedCalls", "Aborted"}
	fortioHTTP = []string{"RetCodes", "IPCountMap", "Insecure", "MTLS", "CACert", "Cert", "Key",
		"UnixDomainSocket", "URL", "NumConnections", "Compression", "DisableFastClient", "HTTP10",
		"H2", "DisableKeepAlive", "AllowHalfClose", "FollowRedirects", "Resolve", "HTTPReqTimeOut",
		"UserCredentials", "ContentType", "Payload", "MethodOverride", "LogErrors",
		"SequentialWarmup", "ConnReuseRange", "NoResolveEachConn", "Offset", "Resolution", "Sizes",
		"HeaderSizes", "Sockets", "SocketCount", "ConnectionStats", "AbortOn"}
	fortioTCP = []string{"Destination", "Payload", "UnixDomainSocket", "ReqTimeout", "RetCodes",
		"SocketCount", "BytesSent", "BytesReceived"}
	fortioGRPC = []string{"RetCodes", "Destination", "Streams", "Ping", "Metadata"}
)

// topLevelKeys returns the keys of a JSON object in the order they are written.
func topLevelKeys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestResultsHaveFortiosFieldsInFortiosOrder(t *testing.T) {
	common := append(append([]string{}, fortioCommon...), meshperfAdded...)
	for name, tc := range map[string]struct {
		v    any
		want []string
	}{
		"HTTP": {httpload.Result{}, append(append([]string{}, common...), fortioHTTP...)},
		"TCP":  {tcpload.Result{}, append(append([]string{}, common...), fortioTCP...)},
		"gRPC": {grpcload.Result{}, append(append([]string{}, common...), fortioGRPC...)},
	} {
		if got := topLevelKeys(t, tc.v); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s result fields:\n got %v\nwant %v", name, got, tc.want)
		}
	}
}
