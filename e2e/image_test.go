package e2e

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/testenv"
)

// imageBuildTimeout bounds `make image`: a cold build cache compiles every
// package again (CGO_ENABLED=0 is a build of its own), which takes minutes
// on a busy 2-core machine.
const imageBuildTimeout = 20 * time.Minute

// podmanStore is a podman command on a storage of the test's own: the vfs
// driver works wherever podman does (overlay cannot mount inside some
// containers), and the machine's own images are never touched.
type podmanStore struct {
	t      *testing.T
	global []string // podman followed by its storage flags
}

func newPodmanStore(t *testing.T) *podmanStore {
	t.Helper()
	podman := testenv.Program(t, "podman", "make image builds with it: apt-get install podman")
	dir := t.TempDir()
	return &podmanStore{t: t, global: []string{podman,
		"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"),
		"--tmpdir", filepath.Join(dir, "tmp"), "--storage-driver", "vfs"}}
}

// run runs podman with args and returns its standard output; a failure, or
// a command still running after a minute, fails the test.
func (p *podmanStore) run(args ...string) []byte {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.global[0], append(p.global[1:], args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		p.t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// imageConfig is what `podman image inspect` says of an image's config.
type imageConfig struct {
	User         string
	ExposedPorts map[string]struct{}
	Entrypoint   []string
	Cmd          []string
	Volumes      map[string]struct{}
	Labels       map[string]string
}

// make image builds an image a container runtime can run as it stands: a
// static binary as a numeric non-root user, port 8080, a /data volume that
// user owns, and a CMD that serves the embedded store on /data to other
// hosts. Containers cannot run here, so the binary is taken out of the
// image and run with the image's CMD, on a loopback port and a folder of
// the test's own.
func TestImage(t *testing.T) {
	makeProgram := testenv.Program(t, "make", "GNU make, for `make image`")
	p := newPodmanStore(t)
	tag := "localhost/listgate-test:" + strconv.FormatInt(time.Now().UnixNano(), 36)

	ctx, cancel := context.WithTimeout(context.Background(), imageBuildTimeout)
	defer cancel()
	build := exec.CommandContext(ctx, makeProgram, "image", "IMAGE="+tag,
		"IMAGE_CONTEXT="+filepath.Join(t.TempDir(), "context"),
		"CONTAINER_TOOL="+strings.Join(p.global, " "))
	build.Dir = ".."
	build.Env = cleanEnv()
	t.Cleanup(func() {
		// Removed even when the build stopped half way; the storage goes with the test's folder.
		exec.Command(p.global[0], append(p.global[1:], "rmi", "--force", "--ignore", tag)...).Run()
	})
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make image (within %v): %v\n%s", imageBuildTimeout, err, out)
	}

	var inspected []struct{ Config imageConfig }
	if err := json.Unmarshal(p.run("image", "inspect", tag), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("podman image inspect: %v (%d images)", err, len(inspected))
	}
	cfg := inspected[0].Config
	uid, gid, ok := strings.Cut(cfg.User, ":")
	uidN, uidErr := strconv.Atoi(uid)
	_, gidErr := strconv.Atoi(gid)
	if !ok || uidErr != nil || gidErr != nil || uidN == 0 {
		t.Errorf("the image's user is %q, want a numeric uid:gid other than root (Kubernetes checks runAsNonRoot against a number)", cfg.User)
	}
	if _, ok := cfg.ExposedPorts["8080/tcp"]; !ok || len(cfg.ExposedPorts) != 1 {
		t.Errorf("the image exposes %v, want 8080/tcp", cfg.ExposedPorts)
	}
	if _, ok := cfg.Volumes["/data"]; !ok || len(cfg.Volumes) != 1 {
		t.Errorf("the image's volumes are %v, want /data", cfg.Volumes)
	}
	if !slices.Equal(cfg.Entrypoint, []string{"/listgate"}) {
		t.Errorf("the image's entrypoint is %q, want [/listgate]", cfg.Entrypoint)
	}
	wantCmd := []string{"--listen", "0.0.0.0:8080", "--dev-allow-remote", "--data-dir", "/data"}
	if !slices.Equal(cfg.Cmd, wantCmd) {
		t.Fatalf("the image's CMD is %q, want %q", cfg.Cmd, wantCmd)
	}

	// The image's files, read through a mount of its filesystem.
	root := strings.TrimSpace(string(p.run("image", "mount", tag)))
	t.Cleanup(func() { p.run("image", "unmount", tag) })
	if fi, err := os.Stat(filepath.Join(root, "data")); err != nil || !fi.IsDir() ||
		strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Uid)) != uid {
		t.Errorf("/data in the image: %v, %v; want a folder owned by uid %s", fi, err, uid)
	}
	if passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd")); err != nil || !strings.Contains(string(passwd), ":x:"+uid+":"+gid+":") {
		t.Errorf("/etc/passwd in the image (%v) names no user %s:\n%s", err, cfg.User, passwd)
	}
	if certs, err := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt")); err != nil || !bytes.Contains(certs, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("the image has no CA certificates for TLS: %v", err)
	}
	binary, err := os.ReadFile(filepath.Join(root, "listgate"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "listgate")
	if err := os.WriteFile(bin, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	checkStatic(t, bin)

	// The version make image stamped, as its labels say.
	out, errOut, code := runCommand(t, bin, nil, "--version")
	lines := strings.Split(out, "\n")
	version, revision := cfg.Labels["org.opencontainers.image.version"], cfg.Labels["org.opencontainers.image.revision"]
	if code != 0 || errOut != "" || version == "" || lines[0] != "listgate "+version || !strings.HasPrefix(lines[1], "revision "+revision) {
		t.Fatalf("the image's listgate --version exited %d and wrote\n%s%s\nwant version %q, revision %q (its labels)", code, out, errOut, version, revision)
	}

	// The image's CMD, on a loopback port and a folder of the test's own.
	args := slices.Clone(cfg.Cmd)
	args[slices.Index(args, "--listen")+1] = "127.0.0.1:0"
	args[slices.Index(args, "--data-dir")+1] = t.TempDir()
	g := startGatewayCommand(t, bin, args, "LISTGATE_LOG_LEVEL=warn")
	g.mustOK(`mutation { createListFeature(input: {entityType: "user", name: "reading_history", valueType: STRING, ttlSeconds: 86400}) { key } }`, nil)
	g.mustOK(`mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "reading_history"}, items: [{value: "story1"}]) { added } }`, nil)
	r := g.mustOK(`{ listItems(entityType: "user", entityId: "u1", feature: "reading_history") { items { value } } }`, nil)
	if !strings.Contains(string(r.Data), `"story1"`) {
		t.Fatalf("the list read back is %s, want story1", r.Data)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(g.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s answered %d", path, resp.StatusCode)
		}
	}
}

// checkStatic fails the test unless the ELF binary at path needs no
// dynamic loader and no shared library: the image has none to give it.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Fatalf("%s asks for a dynamic loader: it was not built with CGO_ENABLED=0", path)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Fatalf("%s needs shared libraries %v (%v)", path, libs, err)
	}
}
