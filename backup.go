package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/listgate/listgate/store/embedded"
)

// A gateway serving the embedded store holds its data folder's lock, so no
// other process may open the folder while it runs; it makes backups
// itself, asked through a Unix socket in the folder. Who may use the
// socket is the file system's to say (the gateway's user alone): no
// listener on a port, no credential of its own, and only who may read the
// data folder anyway can copy it. Whether a folder may take a backup is
// the store's to decide (embedded.Store.Backup), for the socket and the
// command alike.

// backupSocket is the name of the socket in the data folder.
const backupSocket = "backup.sock"

// maxSocketPath is the longest socket path every Unix takes (sun_path is
// 104 bytes on the BSDs and macOS, 108 on Linux, the NUL included).
const maxSocketPath = 103

const backupUsage = `Usage: listgate backup --to DIR [flags]

listgate backup copies the embedded store of --data-dir to DIR, a folder
outside the data folder (by whatever path) that must not exist or must be
empty, as it was at one moment: every add acknowledged before the command
began is in it. While a gateway serves the
store, that gateway makes the copy, asked through the socket backup.sock in
the data folder (which only the gateway's user may use), and goes on
serving; with none running, the command opens the folder and copies it.

On the data folder's file system the copy hard-links the store's immutable
files; copy DIR elsewhere to keep it past the disk. To restore, start a
gateway with --data-dir DIR.

`

// runBackup backs up the embedded store of --data-dir to --to.
func runBackup(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	var c config
	fs, _ := commandFlags("backup", &c, "data-dir")
	to := fs.String("to", "", "the folder to write the backup to: one outside the data folder that does not exist, or an empty one")
	if _, err := parseCommand(fs, backupUsage, args, getenv, stdout); err != nil {
		return err
	}
	if *to == "" {
		return errors.New("listgate backup needs --to, the folder to write the backup to")
	}
	dataDir, err := filepath.Abs(c.DataDir)
	if err != nil {
		return err
	}
	target, err := filepath.Abs(*to)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dataDir); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	live, err := backupLive(ctx, dataDir, target)
	switch {
	case err != nil:
		return err
	case live:
		_, err := fmt.Fprintf(stdout, "listgate backup: the gateway serving %s backed it up to %s; to restore, start a gateway with --data-dir %s\n", dataDir, target, target)
		return err
	}
	err = embedded.BackupFolder(dataDir, target)
	var inUse *embedded.InUseError
	if errors.As(err, &inUse) {
		return fmt.Errorf("%w, which does not answer on its socket %s: only a gateway of this release with a data folder path short enough for a socket takes backups while it serves; stop it, or back up its files with it stopped", err, filepath.Join(dataDir, backupSocket))
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "listgate backup: backed up %s (no gateway serves it) to %s; to restore, start a gateway with --data-dir %s\n", dataDir, target, target)
	return err
}

// backupLive asks the gateway serving dataDir, if one does, to back its
// store up to target; it reports false when none answers on the socket.
func backupLive(ctx context.Context, dataDir, target string) (bool, error) {
	sock := filepath.Join(dataDir, backupSocket)
	if len(sock) > maxSocketPath {
		return false, nil
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	defer client.CloseIdleConnections()
	body, err := json.Marshal(backupRequest{To: target})
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://listgate/backup", strings.NewReader(string(body)))
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return false, nil // no gateway serves the folder, or one ended without removing its socket
	}
	if err != nil {
		return false, fmt.Errorf("asking the gateway through %s: %w", sock, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("the gateway serving %s: %s", dataDir, strings.TrimSpace(string(msg)))
	}
	return true, nil
}

type backupRequest struct {
	To string `json:"to"` // an absolute path
}

// backupServer takes backups of a serving gateway's embedded store.
type backupServer struct {
	srv    *http.Server
	mu     sync.Mutex // one backup at a time, and none once the store closes
	closed bool
}

// listenBackups serves backups of st on the socket in its data folder dir.
// A gateway that cannot listen there serves all the same, and logs why
// backups need it stopped.
func listenBackups(dir string, st *embedded.Store, log *slog.Logger) *backupServer {
	b := &backupServer{}
	abs, err := filepath.Abs(dir)
	if err != nil {
		log.Warn("backups while serving are off", "err", err)
		return b
	}
	sock := filepath.Join(abs, backupSocket)
	if len(sock) > maxSocketPath {
		log.Warn("backups while serving are off: the data folder's path is too long for a socket; listgate backup needs the gateway stopped", "socket", sock)
		return b
	}
	// The store's lock is this process's: a socket left there is of one
	// that ended without removing it.
	if fi, err := os.Lstat(sock); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		os.Remove(sock)
	}
	ln, err := net.Listen("unix", sock)
	if err == nil {
		err = os.Chmod(sock, 0o600)
	}
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		log.Warn("backups while serving are off; listgate backup needs the gateway stopped", "socket", sock, "err", err)
		return b
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /backup", func(w http.ResponseWriter, r *http.Request) {
		var req backupRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&req); err != nil || !filepath.IsAbs(req.To) {
			http.Error(w, `the request must be {"to": "/an/absolute/path"}`, http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed {
			http.Error(w, "the gateway is shutting down", http.StatusServiceUnavailable)
			return
		}
		start := time.Now()
		err := st.Backup(filepath.Clean(req.To))
		var target *embedded.TargetError
		switch {
		case errors.As(err, &target):
			http.Error(w, err.Error(), http.StatusConflict)
		case err != nil:
			log.Error("backup failed", "to", req.To, "err", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			log.Info("backed up the embedded store", "to", req.To, "duration", time.Since(start))
			io.WriteString(w, "ok\n")
		}
	})
	b.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		if err := b.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Warn("backup socket stopped", "socket", sock, "err", err)
		}
	}()
	return b
}

// close stops taking backups, removes the socket and waits for a backup
// under way: the store must not close under it.
func (b *backupServer) close() {
	if b.srv != nil {
		b.srv.Close()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
}
