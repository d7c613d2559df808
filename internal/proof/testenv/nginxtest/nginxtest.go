// Package nginxtest runs a real nginx as the web server in front of a
// test's PSP simulator, as a PSP's front end would be: it decodes the
// request path, merges slashes and removes dot segments before it routes
// and proxies it (issue 38).
package nginxtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/proc"
)

// conf is a PSP front end as it is commonly written: nginx
// normalizes the path (decodes %XX, merges slashes, removes dot segments)
// and, because proxy_pass names a URI, passes the normalized path on.
const conf = `daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 64; }
http {
	access_log %[1]s/access.log;
	client_body_temp_path %[1]s/tmp;
	proxy_temp_path %[1]s/tmp;
	fastcgi_temp_path %[1]s/tmp;
	uwsgi_temp_path %[1]s/tmp;
	scgi_temp_path %[1]s/tmp;
	server {
		listen 127.0.0.1:%[2]d;
		location = /nginx-health { return 200 "ok"; }
		location /api/ {
			proxy_pass http://%[3]s/api/;
			proxy_read_timeout 5s;
		}
	}
}
`

// Start starts Debian's nginx in front of upstream (host:port), on a free
// loopback port, with its configuration, pid file, logs and temporary
// files in a temporary directory (no daemon, no master process), and
// returns its base URL. nginx is killed at the test's cleanup. Under
// CI=true a missing nginx fails the test.
func Start(t testing.TB, upstream string) string {
	t.Helper()
	bin := "/usr/sbin/nginx" // Debian's, outside a non-root PATH
	if _, err := os.Stat(bin); err != nil {
		bin = testenv.NeedTool(t, "nginx")
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	port := testenv.Port(t)
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(conf, dir, port, upstream)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := proc.StartT(t, proc.Spec{Name: "nginx", Bin: bin, Args: []string{"-p", dir, "-c", file, "-e", filepath.Join(dir, "error.log")}})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := testenv.Poll(ctx, 15*time.Second, 50*time.Millisecond, func() (bool, error) {
		if p.Exited() {
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			return false, fmt.Errorf("nginx exited: %s", b)
		}
		resp, err := http.Get(base + "/nginx-health")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("nginx did not come up: %v", err)
	}
	return base
}
