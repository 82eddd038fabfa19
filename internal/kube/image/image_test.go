package image

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/meshperf/meshperf/internal/testutil"
)

// tarEntry is what a test checks of one entry of a layer.
type tarEntry struct {
	typeflag byte
	mode     int64
	link     string
	data     string
}

func layerEntriesOf(t *testing.T, img v1.Image, i int) map[string]tarEntry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[i].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries := map[string]tarEntry{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.ModTime.Unix() != 0 {
			t.Errorf("%s: uid %d gid %d time %v, want root's and the epoch", hdr.Name, hdr.Uid, hdr.Gid, hdr.ModTime)
		}
		entries[hdr.Name] = tarEntry{hdr.Typeflag, hdr.Mode, hdr.Linkname, string(data)}
	}
}

func testSpec(t *testing.T) Spec {
	src := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(src, []byte("#!tool\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	return Spec{
		Layers: [][]File{
			{{Path: "/usr/bin/tool", Source: src}},
			{
				{Path: "/etc/config", Mode: 0o600, Data: []byte("key=value\n")},
				{Path: "/usr/sbin/tool-link", Link: "../bin/tool"},
			},
		},
		Entrypoint: []string{"/usr/bin/tool", "run"},
		Env:        []string{"A=1"},
		WorkingDir: "/",
	}
}

func TestBuildCarriesFilesModesLinksAndConfig(t *testing.T) {
	img, err := Build(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	first := layerEntriesOf(t, img, 0)
	want := map[string]tarEntry{
		"usr/":         {tar.TypeDir, 0o755, "", ""},
		"usr/bin/":     {tar.TypeDir, 0o755, "", ""},
		"usr/bin/tool": {tar.TypeReg, 0o750, "", "#!tool\n"},
	}
	if !mapsEqual(first, want) {
		t.Errorf("first layer = %v, want %v", first, want)
	}
	second := layerEntriesOf(t, img, 1)
	want = map[string]tarEntry{
		"etc/":               {tar.TypeDir, 0o755, "", ""},
		"etc/config":         {tar.TypeReg, 0o600, "", "key=value\n"},
		"usr/":               {tar.TypeDir, 0o755, "", ""},
		"usr/sbin/":          {tar.TypeDir, 0o755, "", ""},
		"usr/sbin/tool-link": {tar.TypeSymlink, 0o777, "../bin/tool", ""},
	}
	if !mapsEqual(second, want) {
		t.Errorf("second layer = %v, want %v", second, want)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !slices.Equal(cf.Config.Entrypoint, []string{"/usr/bin/tool", "run"}) ||
		!slices.Equal(cf.Config.Env, []string{"A=1"}) || cf.Created.Unix() != 0 {
		t.Errorf("config = %s/%s entrypoint %q env %q created %v", cf.OS, cf.Architecture, cf.Config.Entrypoint, cf.Config.Env, cf.Created)
	}
	if mt, _ := img.MediaType(); mt != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %s, want OCI's", mt)
	}
}

func mapsEqual(a, b map[string]tarEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Rebuilding the same files gives the same image, byte for byte.
func TestBuildIsDeterministic(t *testing.T) {
	spec := testSpec(t)
	a, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("two builds of one spec: %s and %s", da, db)
	}
}

func TestBuildRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		files []File
		want  string
	}{
		{[]File{{Path: "/x", Source: filepath.Join(dir, "missing")}}, "missing"},
		{[]File{{Path: "/x", Source: dir}}, "not a regular file"},
		{[]File{{Path: "relative", Data: []byte("x")}}, "clean absolute path"},
		{[]File{{Path: "/a/../b", Data: []byte("x")}}, "clean absolute path"},
		{[]File{{Path: "/x", Data: []byte("1")}, {Path: "/x", Data: []byte("2")}}, "given twice"},
		{[]File{{Path: "/x", Data: []byte("1"), Link: "y"}}, "one of Source, Data and Link"},
	} {
		if _, err := Build(Spec{Layers: [][]File{tc.files}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build(%v) error = %v, want one containing %q", tc.files, err, tc.want)
		}
	}
}

// The archive is an OCI image layout that names the image for containerd,
// and reads back as the same image.
func TestWriteArchiveNamesTheImage(t *testing.T) {
	img, err := Build(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "tool.oci.tar")
	ref := Ref(DefaultRepo, "tool", "v1.2.3")
	if err := WriteArchive(archive, ref, img); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	untar(t, archive, dir)
	var index v1.IndexManifest
	data, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index lists %d manifests, want 1", len(index.Manifests))
	}
	ann := index.Manifests[0].Annotations
	if ann[AnnotationContainerdName] != "meshperf.local/tool:v1.2.3" || ann[AnnotationRefName] != "v1.2.3" {
		t.Errorf("annotations = %v", ann)
	}
	ii, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	back, err := ii.Image(want)
	if err != nil {
		t.Fatalf("image %s not in the layout: %v", want, err)
	}
	if got := layerEntriesOf(t, back, 1)["etc/config"].data; got != "key=value\n" {
		t.Errorf("read back /etc/config = %q", got)
	}
}

func TestWriteArchiveRefusesABadReferenceAndLeavesNothing(t *testing.T) {
	img, err := Build(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteArchive(filepath.Join(dir, "x.tar"), "Bad Ref", img); err == nil {
		t.Fatal("WriteArchive took a reference with a space")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %v behind", entries)
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, fs.FileMode(hdr.Mode)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTagsAndRefs(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.3":            "v1.2.3",
		"dev-0123456789ab":  "dev-0123456789ab",
		"v0.0.0+incompat/x": "v0.0.0-incompat-x",
		".hidden":           "_hidden",
		"":                  "dev",
	} {
		if got := SanitiseTag(in); got != want {
			t.Errorf("SanitiseTag(%q) = %q, want %q", in, got, want)
		}
		if err := CheckTag(SanitiseTag(in)); err != nil {
			t.Errorf("CheckTag(SanitiseTag(%q)): %v", in, err)
		}
	}
	if got := SanitiseTag(strings.Repeat("a", 200)); len(got) != 128 {
		t.Errorf("a 200-character version gives a %d-character tag", len(got))
	}
	if err := CheckTag(Tag()); err != nil {
		t.Errorf("Tag() = %q: %v", Tag(), err)
	}
	if got := Ref("registry.example:5000/team/", Proxy, "t1"); got != "registry.example:5000/team/meshperf-proxy:t1" {
		t.Errorf("Ref = %q", got)
	}
	for _, repo := range []string{DefaultRepo, "localhost:5000", "registry.example/a/b"} {
		if err := CheckRepo(repo); err != nil {
			t.Errorf("CheckRepo(%q): %v", repo, err)
		}
	}
	for _, repo := range []string{"", "UPPER/case", "a b", "registry:port/x"} {
		if err := CheckRepo(repo); err == nil {
			t.Errorf("CheckRepo(%q) took it", repo)
		}
	}
}

func TestCheckStaticTellsDynamicFromStatic(t *testing.T) {
	if err := CheckStatic("/bin/sh"); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("CheckStatic(/bin/sh) = %v, want it called dynamically linked", err)
	}
	if err := CheckStatic(testutil.MeshperfBinary(t)); err != nil {
		t.Errorf("the static meshperf: %v", err)
	}
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckStatic(notELF); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("CheckStatic(script) = %v", err)
	}
}

// The pause image runs `meshperf pause` from a layer that is byte for byte
// the one meshperf's own image starts with.
func TestPauseImageRunsMeshperfPause(t *testing.T) {
	exe := testutil.MeshperfBinary(t)
	img, err := PauseImage(exe)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{BinaryPath, "pause"}) {
		t.Errorf("entrypoint %q", cf.Config.Entrypoint)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v; want 1", len(layers), err)
	}
	shared, err := Layer(binaryLayer(exe))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := layers[0].Digest()
	want, _ := shared.Digest()
	if got != want {
		t.Errorf("pause layer %s, meshperf binary layer %s: not shared", got, want)
	}
	if _, err := PauseImage("/bin/sh"); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("PauseImage(dynamic) = %v, want the hint to build it static", err)
	}
}
