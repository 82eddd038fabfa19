package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshperf/meshperf/internal/kube/cluster"
	"github.com/meshperf/meshperf/internal/kube/image"
	"github.com/meshperf/meshperf/internal/syscmd"
)

// Image runs `meshperf image`: meshperf's OCI images (meshperf, its proxy,
// the pod sandbox) built from this machine's binaries, for a cluster that
// pulls from no registry, or pushed to the user's.
func Image(args []string, stdout, stderr io.Writer) int {
	g := commandGroup{
		name: "meshperf image",
		about: "meshperf's OCI images, from scratch: REPO/meshperf (this static binary, iptables-restore, Istio's CRDs),\n" +
			"REPO/meshperf-proxy and REPO/pause (the pod sandbox), tagged with meshperf's version (docs/kubernetes.md).",
		subs: []subcommand{
			{name: "build", about: "write the images as OCI archives, to import into a node's containerd",
				run: func(args []string) int { return imageBuild(args, stdout, stderr) }},
			{name: "import", about: "import OCI archives into a containerd (the kubelet's namespace, k8s.io)",
				run: func(args []string) int { return imageImport(args, stdout, stderr) }},
			{name: "push", about: "build the images and push them to a registry",
				run: func(args []string) int { return untilSignalled(imagePush, args, stdout, stderr) }},
		},
	}
	return g.run(args, stdout, stderr)
}

// imageFlags are what build and push share: the images' names and the
// proxy they carry.
type imageFlags struct {
	repo, tag, proxy string
}

func (f *imageFlags) register(cmd *command, repoDefault string) {
	cmd.flags.StringVar(&f.repo, "image-repo", repoDefault, "the `registry/path` the images are named under")
	cmd.flags.StringVar(&f.tag, "tag", "", "the images' `tag` (default: meshperf's version as a valid tag)")
	cmd.flags.StringVar(&f.proxy, "proxy", "", "the static meshperf-proxy `binary` (default: beside meshperf, then proxy/target/release, then $PATH)")
}

// build checks the flags and the binaries, then builds the images.
func (f *imageFlags) build() ([]image.Named, error) {
	if err := image.CheckRepo(f.repo); err != nil {
		return nil, usageError{err.Error()}
	}
	if f.tag != "" {
		if err := image.CheckTag(f.tag); err != nil {
			return nil, usageError{err.Error()}
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding meshperf's own executable: %w", err)
	}
	proxy, err := findProxy(f.proxy, exe)
	if err != nil {
		return nil, inputError{err}
	}
	if err := image.CheckStatic(exe); err != nil {
		return nil, inputError{fmt.Errorf("%w; %s", err, image.BuildStaticHint)}
	}
	if err := image.CheckStatic(proxy); err != nil {
		return nil, inputError{fmt.Errorf("%w; %s", err, image.BuildStaticProxyHint)}
	}
	crds, err := image.CRDFiles()
	if err != nil {
		return nil, err
	}
	return image.All(f.repo, f.tag, image.Sources{Meshperf: exe, Proxy: proxy, CRDs: crds})
}

func imageBuild(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf image build", "[flags]",
		"Writes DIR/meshperf.oci.tar, meshperf-proxy.oci.tar and pause.oci.tar: OCI image layouts whose index names\n"+
			"each image (io.containerd.image.name), as `ctr images import` and `meshperf image import` read them.\n"+
			"meshperf must be static (CGO_ENABLED=0), and so must the proxy (scripts/build). The images are\n"+
			"deterministic: the same binaries give the same digests.")
	var f imageFlags
	f.register(cmd, image.DefaultRepo)
	out := cmd.flags.String("out", filepath.Join("bin", "images"), "the `dir` to write the archives to")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	images, err := f.build()
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return cmd.exit(stderr, err)
	}
	for _, img := range images {
		path := filepath.Join(*out, image.ArchiveName(img.Name))
		if err := image.WriteArchive(path, img.Ref, img.Image); err != nil {
			return cmd.exit(stderr, err)
		}
		digest, err := img.Image.Digest()
		if err != nil {
			return cmd.exit(stderr, err)
		}
		if _, err := fmt.Fprintf(stdout, "%s@%s\t%s\n", img.Ref, digest, path); err != nil {
			return cmd.exit(stderr, err)
		}
	}
	return exitOK
}

func imageImport(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf image import", "[--containerd SOCKET] DIR|ARCHIVE...",
		"Imports OCI archives (those `meshperf image build` writes; every *.oci.tar of a DIR) into the containerd\n"+
			"listening on SOCKET, in the namespace the kubelet reads (k8s.io), with containerd's ctr. Pods then use\n"+
			"them with imagePullPolicy: Never. Every archive is checked before the first is imported.")
	address := cmd.flags.String("containerd", cluster.ContainerdSocket(cluster.DefaultStateDir), "the containerd `socket` to import into (default: the local cluster's node, meshperf cluster up)")
	rest, err := cmd.parse(args, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if len(rest) == 0 {
		return cmd.exit(stderr, usagef("no archive or directory given"))
	}
	if st, err := os.Stat(*address); err != nil || st.Mode()&os.ModeSocket == 0 {
		return cmd.exit(stderr, inputError{fmt.Errorf("--containerd %s: no containerd socket there (is containerd running? For the local cluster: meshperf cluster up)", *address)})
	}
	archives, err := importArchives(rest)
	if err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	refs := make([]string, len(archives))
	for i, a := range archives {
		if refs[i], err = image.ArchiveRef(a); err != nil {
			return cmd.exit(stderr, inputError{err})
		}
	}
	ctr, err := syscmd.Find("ctr", "containerd")
	if err != nil {
		return cmd.exit(stderr, err)
	}
	for i, a := range archives {
		if err := image.Import(context.Background(), ctr, *address, a); err != nil {
			return cmd.exit(stderr, err)
		}
		if _, err := fmt.Fprintf(stdout, "imported %s from %s\n", refs[i], a); err != nil {
			return cmd.exit(stderr, err)
		}
	}
	return exitOK
}

// importArchives expands the arguments: a directory stands for its
// *.oci.tar files.
func importArchives(args []string) ([]string, error) {
	var archives []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			archives = append(archives, a)
			continue
		}
		found, err := filepath.Glob(filepath.Join(a, "*"+image.ArchiveName("")))
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s holds no *%s archive: write them with meshperf image build --out %s", a, image.ArchiveName(""), a)
		}
		archives = append(archives, found...)
	}
	return archives, nil
}

func imagePush(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf image push", "--image-repo REPO [flags]",
		"Builds the images as `meshperf image build` does and pushes them to REPO's registry, with the credentials\n"+
			"docker's config holds (`docker login`). A registry on a loopback or private address is spoken to over HTTP.")
	var f imageFlags
	f.register(cmd, "")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	if f.repo == "" || strings.TrimSuffix(f.repo, "/") == image.DefaultRepo {
		return cmd.exit(stderr, usagef("--image-repo REPO is required: the registry/path to push to (%s is local only)", image.DefaultRepo))
	}
	images, err := f.build()
	if err != nil {
		return cmd.exit(stderr, err)
	}
	for _, img := range images {
		if err := image.Push(ctx, img.Ref, img.Image); err != nil {
			return cmd.exit(stderr, err)
		}
		digest, err := img.Image.Digest()
		if err != nil {
			return cmd.exit(stderr, err)
		}
		if _, err := fmt.Fprintf(stdout, "pushed %s@%s\n", img.Ref, digest); err != nil {
			return cmd.exit(stderr, err)
		}
	}
	return exitOK
}
