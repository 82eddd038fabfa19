package pingpb

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestWireNamesMatchFortio pins the names and field numbers that make this
// service interoperate with Fortio's grpcping client and server.
func TestWireNamesMatchFortio(t *testing.T) {
	if PingServer_Ping_FullMethodName != "/fgrpc.PingServer/Ping" {
		t.Errorf("method = %q, want /fgrpc.PingServer/Ping", PingServer_Ping_FullMethodName)
	}
	md := (&PingMessage{}).ProtoReflect().Descriptor()
	if md.FullName() != "fgrpc.PingMessage" {
		t.Errorf("message = %s, want fgrpc.PingMessage", md.FullName())
	}
	want := map[protoreflect.Name]protoreflect.FieldNumber{"seq": 1, "ts": 2, "payload": 3, "delayNanos": 4}
	if md.Fields().Len() != len(want) {
		t.Errorf("%d fields, want %d", md.Fields().Len(), len(want))
	}
	for name, num := range want {
		f := md.Fields().ByName(name)
		if f == nil || f.Number() != num {
			t.Errorf("field %s: got %v, want number %d", name, f, num)
		}
	}
}
