package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
)

// TestGoodFiles decodes every testdata/*.good.* file and round-trips each
// object through Encode.
func TestGoodFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.good.*")
	if len(files) == 0 {
		t.Fatal("no testdata/*.good.* files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := Decode(filepath.Base(f), data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if len(rs) == 0 {
				t.Fatal("no resources decoded")
			}
			for _, r := range rs {
				assertRoundTrip(t, r)
			}
		})
	}
}

// TestBadFiles decodes every testdata/*.bad.* file; its first line is
// "# error: SUBSTRING" and the error must contain SUBSTRING on one line.
func TestBadFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.bad.*")
	if len(files) == 0 {
		t.Fatal("no testdata/*.bad.* files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want := expectedError(t, f)
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := Decode(filepath.Base(f), data)
			if err == nil {
				t.Fatalf("Decode succeeded with %d resources, want error containing %q", len(rs), want)
			}
			if rs != nil {
				t.Errorf("Decode returned %d resources along with its error", len(rs))
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			if !strings.Contains(msg, want) {
				t.Errorf("error\n  %s\ndoes not contain\n  %s", msg, want)
			}
		})
	}
}

func assertRoundTrip(t *testing.T, r *Resource) {
	t.Helper()
	js, err := Encode(r)
	if err != nil {
		t.Fatalf("Encode(%s): %v", r.Key(), err)
	}
	again, err := Encode(r)
	if err != nil || !bytes.Equal(js, again) {
		t.Fatalf("Encode(%s) is not deterministic:\n%s\n%s", r.Key(), js, again)
	}
	back, err := Decode("encoded", js)
	if err != nil {
		t.Fatalf("Decode(Encode(%s)): %v\n%s", r.Key(), err, js)
	}
	if len(back) != 1 || !Equal(r, back[0]) {
		t.Fatalf("round trip of %s changed it:\n%s", r.Key(), js)
	}
	y, err := EncodeYAML(r)
	if err != nil {
		t.Fatalf("EncodeYAML(%s): %v", r.Key(), err)
	}
	back, err = Decode("encoded.yaml", y)
	if err != nil || len(back) != 1 || !Equal(r, back[0]) {
		t.Fatalf("YAML round trip of %s: %v\n%s", r.Key(), err, y)
	}
}

func TestDecodeKindsAndDefaults(t *testing.T) {
	data, err := os.ReadFile("testdata/kinds.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Decode("kinds.good.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(Kinds) {
		t.Fatalf("got %d resources, want one per kind (%d)", len(rs), len(Kinds))
	}
	for i, r := range rs {
		if r.Kind != Kinds[i] {
			t.Errorf("resource %d: kind %s, want %s", i, r.Kind, Kinds[i])
		}
	}
	if ns := rs[0]; ns.Meta.Namespace != "" || ns.Meta.Labels["istio-injection"] != "enabled" {
		t.Errorf("namespace decoded as %+v", ns.Meta)
	}
	svc, ok := rs[1].Spec.(*corev1.ServiceSpec)
	if !ok || len(svc.Ports) != 1 || svc.Ports[0].Port != 9080 || svc.Ports[0].TargetPort.IntValue() != 9080 {
		t.Errorf("service spec decoded as %#v", rs[1].Spec)
	}
	vs, ok := rs[4].Spec.(*networking.VirtualService)
	if !ok || len(vs.Http) != 2 || vs.Http[1].Route[1].Weight != 25 || vs.Http[1].Timeout.AsDuration().Seconds() != 10 {
		t.Errorf("virtual service spec decoded as %v", rs[4].Spec)
	}
	if rs[4].APIVersion != "networking.istio.io/v1alpha3" {
		t.Errorf("apiVersion %q, want it as written", rs[4].APIVersion)
	}
}

func TestDecodeDefaultNamespace(t *testing.T) {
	rs, err := Decode("x.yaml", []byte("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: r}\nspec: {host: r}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := rs[0].Key().String(); got != "DestinationRule/default/r" {
		t.Errorf("key %s, want DestinationRule/default/r", got)
	}
	rs, err = Decode("x.yaml", []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: ns1, namespace: other}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := rs[0].Key().String(); got != "Namespace/ns1" {
		t.Errorf("key %s, want Namespace/ns1 (cluster-scoped)", got)
	}
}

func TestDecodeEmpty(t *testing.T) {
	for _, in := range []string{"", "---\n", "# nothing\n---\n---\n", "null\n"} {
		rs, err := Decode("e.yaml", []byte(in))
		if err != nil || len(rs) != 0 {
			t.Errorf("Decode(%q) = %d resources, %v; want none, no error", in, len(rs), err)
		}
	}
}

func TestDocumentNumbersSkipEmpty(t *testing.T) {
	in := "---\n# c\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Nope\n"
	_, err := Decode("f.yaml", []byte(in))
	if err == nil || !strings.HasPrefix(err.Error(), "f.yaml: document 2: kind \"Nope\"") {
		t.Errorf("got %v, want the second non-empty document named", err)
	}
}

func TestEncodeStable(t *testing.T) {
	in := "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: r\n  labels: {b: \"2\", a: \"1\"}\nspec:\n  host: r\n  subsets:\n  - name: v1\n    labels: {z: \"1\", \"y\": \"2\", x: \"3\"}\n"
	rs, err := Decode("x.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Encode(rs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"networking.istio.io/v1","kind":"DestinationRule","metadata":{"name":"r","namespace":"default","labels":{"a":"1","b":"2"}},"spec":{"host":"r","subsets":[{"name":"v1","labels":{"x":"3","y":"2","z":"1"}}]}}`
	if string(got) != want {
		t.Errorf("Encode =\n%s\nwant\n%s", got, want)
	}
}

func TestReadPaths(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n")
	write("a.yml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
	write("c.json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"c"}}`)
	write("notes.txt", "not config")
	stdin := strings.NewReader("apiVersion: v1\nkind: Namespace\nmetadata: {name: s}\n")
	rs, err := ReadPaths([]string{dir, "-"}, stdin)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rs {
		names = append(names, r.Meta.Name)
	}
	if got := strings.Join(names, ","); got != "a,b,c,s" {
		t.Errorf("read %s, want a,b,c,s (sorted directory, then stdin)", got)
	}

	write("d.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: D}\n")
	_, err = ReadPaths([]string{dir}, nil)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "d.yaml")+": document 1 (Namespace D): metadata.name") {
		t.Errorf("got %v, want an error naming d.yaml", err)
	}
	_, err = ReadPaths([]string{filepath.Join(dir, "missing.yaml")}, nil)
	if err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("got %v, want an error naming the missing file", err)
	}
}
