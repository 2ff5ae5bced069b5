package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/listgate/listgate/internal/gatewaytest"
	"github.com/listgate/listgate/telemetry"
)

// A backup through a link into the data folder is refused, and nothing is
// written there: by the command while a gateway serves the folder, by the
// gateway's socket asked directly, and by the command with none serving.
// Through a link to a folder outside, the backup is made.
func TestBackupThroughALinkIntoTheDataFolder(t *testing.T) {
	dir := t.TempDir()
	links := t.TempDir()
	into := filepath.Join(links, "data")
	if err := os.Symlink(dir, into); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(links, "outside")
	if err := os.Symlink(t.TempDir(), outside); err != nil {
		t.Fatal(err)
	}
	g := launch(t, telemetry.Options{}, telemetry.NewLogger(gatewaytest.Log{T: t}, "text", slog.LevelWarn), openStore, "--data-dir", dir)
	gatewaytest.Post(t, g.base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`)
	refused := func(how string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "inside the data folder") {
			t.Errorf("%s: %v, want it refused as inside the data folder", how, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "inside")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: the data folder holds %s: %v", how, filepath.Join(dir, "inside"), err)
		}
	}

	_, err := runArgs(t, noEnv, "backup", "--data-dir", dir, "--to", filepath.Join(into, "inside"))
	refused("the command, a gateway serving", err)
	refused("the socket", askSocket(t, dir, filepath.Join(into, "inside")))
	if out, err := runArgs(t, noEnv, "backup", "--data-dir", dir, "--to", filepath.Join(outside, "live")); err != nil || !strings.Contains(out, "the gateway serving") {
		t.Errorf("a live backup through a link to a folder outside: %v %s", err, out)
	}

	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	_, err = runArgs(t, noEnv, "backup", "--data-dir", dir, "--to", filepath.Join(into, "inside"))
	refused("the command, no gateway serving", err)
	if out, err := runArgs(t, noEnv, "backup", "--data-dir", dir, "--to", filepath.Join(outside, "stopped")); err != nil || !strings.Contains(out, "no gateway serves it") {
		t.Errorf("a backup through a link to a folder outside, no gateway serving: %v %s", err, out)
	}
}

// askSocket asks the gateway serving dir for a backup to `to` through its
// socket, as any process of its user could, and returns its refusal.
func askSocket(t *testing.T, dir, to string) error {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", filepath.Join(dir, backupSocket))
		},
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Post("http://listgate/backup", "application/json", strings.NewReader(`{"to": "`+to+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("the socket answered %d, want 409", resp.StatusCode)
	}
	return errors.New(string(body))
}
