package export

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// smpProtoDirEnv names a checkout of the SMP repository
// (github.com/service-mesh-performance/service-mesh-performance); its
// protos are compiled when the test runs, so the documents are checked
// against the schema itself, not against a copy of it.
const smpProtoDirEnv = "MESHPERF_SMP_PROTO_DIR"

// smpFilesEnv lists more SMP documents to check, separated by the OS's
// path-list separator: scripts/smp-validate checks a user's files this way.
const smpFilesEnv = "MESHPERF_SMP_FILES"

// smpSchemaFile is the file, under the checkout, declaring the messages.
const smpSchemaFile = "protos/service_mesh_performance.proto"

// smpMessages are the document's keys and the message each value is.
var smpMessages = map[string]struct {
	message protoreflect.Name
	list    bool
}{
	"performanceTestConfig":  {"PerformanceTestConfig", false},
	"environmentConfigs":     {"EnvironmentConfig", true},
	"serviceMeshConfigs":     {"ServiceMeshConfig", true},
	"performanceTestResults": {"PerformanceTestResult", true},
}

// Each exported document, decoded with protojson into the real SMP
// messages (unknown fields refused), must be exactly what protobuf's own
// JSON encoder writes for the message decoded: field names, enum names,
// 64-bit integers as strings and timestamps in protobuf's form.
func TestSMPDocumentsAgainstSchema(t *testing.T) {
	dir := os.Getenv(smpProtoDirEnv)
	if dir == "" {
		t.Skipf("needs the SMP schema: set %s to a checkout of github.com/service-mesh-performance/service-mesh-performance", smpProtoDirEnv)
	}
	schema := compileSMP(t, dir)

	docs := map[string][]byte{}
	for name, runs := range map[string][]int{"lab run": {0, 1}, "imported run": {2}} {
		all := storedRuns(t, labRun("both-sidecars", "/results/a.json"), labRun("no-mesh", ""), importedRun(t))
		var picked = all[:0:0]
		for _, i := range runs {
			picked = append(picked, all[i])
		}
		var buf bytes.Buffer
		if err := WriteSMP(&buf, picked); err != nil {
			t.Fatal(err)
		}
		docs["exported "+name] = buf.Bytes()
	}
	for _, path := range filepath.SplitList(os.Getenv(smpFilesEnv)) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs[path] = b
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			if err := checkSMPDocument(schema, doc); err != nil {
				t.Error(err)
			} else {
				t.Logf("%s: valid against %s", name, filepath.Join(dir, smpSchemaFile))
			}
		})
	}

	// The check can fail: a misspelt field, a number where the schema has
	// an enum, and an unknown key are each refused.
	good := docs["exported lab run"]
	for bad, broken := range map[string][]byte{
		"unknown field": bytes.Replace(good, []byte(`"actualQps"`), []byte(`"actualQPS"`), 1),
		"mistyped enum": bytes.Replace(good, []byte(`"PROTOCOL_HTTP"`), []byte(`"HTTP"`), 1),
		"snake_case":    bytes.Replace(good, []byte(`"smpVersion"`), []byte(`"smp_version"`), 1),
		"unknown key":   bytes.Replace(good, []byte(`"serviceMeshConfigs"`), []byte(`"meshConfigs"`), 1),
	} {
		if bytes.Equal(broken, good) {
			t.Fatalf("%s: the document has nothing to break", bad)
		}
		if err := checkSMPDocument(schema, broken); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// compileSMP compiles the SMP schema from the checkout (with protobuf's
// well-known types for google/protobuf/timestamp.proto).
func compileSMP(t *testing.T, dir string) protoreflect.FileDescriptor {
	t.Helper()
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{dir}}),
	}
	files, err := c.Compile(context.Background(), smpSchemaFile)
	if err != nil {
		t.Fatalf("compile the SMP schema in %s: %v", dir, err)
	}
	return files[0]
}

// checkSMPDocument decodes each value of the document as its message and
// compares it with protobuf's encoding of what was decoded.
func checkSMPDocument(schema protoreflect.FileDescriptor, doc []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	for key := range top {
		if _, ok := smpMessages[key]; !ok {
			return fmt.Errorf("unknown key %q", key)
		}
	}
	for key, m := range smpMessages {
		raw, ok := top[key]
		if !ok {
			return fmt.Errorf("no %q", key)
		}
		md := schema.Messages().ByName(m.message)
		if md == nil {
			return fmt.Errorf("the schema has no message %s", m.message)
		}
		values := []json.RawMessage{raw}
		if m.list {
			if err := json.Unmarshal(raw, &values); err != nil {
				return fmt.Errorf("%s: not a list: %w", key, err)
			}
		}
		for i, v := range values {
			if err := checkMessage(md, v); err != nil {
				return fmt.Errorf("%s[%d] (%s): %w", key, i, m.message, err)
			}
		}
	}
	return nil
}

func checkMessage(md protoreflect.MessageDescriptor, raw json.RawMessage) error {
	msg := dynamicpb.NewMessage(md)
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(raw, msg); err != nil {
		return err
	}
	canonical, err := protojson.Marshal(msg)
	if err != nil {
		return err
	}
	var got, want any
	if err := json.Unmarshal(raw, &got); err != nil {
		return err
	}
	if err := json.Unmarshal(canonical, &want); err != nil {
		return err
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("not in protobuf's JSON form:\n got %s\nwant %s", compact(raw), canonical)
	}
	return nil
}

func compact(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return strings.TrimSpace(b.String())
}
