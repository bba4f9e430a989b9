package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// process is one child of the test: a control-plane component or the
// extender, with its output in a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{} // closed when the process has exited
	mu      sync.Mutex
	waitErr error
}

func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "# %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.Stdin = nil
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logFile: f, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// testProcess starts a process that belongs to one test and stops it
// (showing its log on failure) when the test ends.
func testProcess(t *testing.T, name, dir, bin string, args ...string) *process {
	t.Helper()
	p, err := startProcess(name, filepath.Join(dir, name+".log"), bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.stop(15 * time.Second)
		if t.Failed() {
			t.Logf("%s log (%s):\n%s", name, p.logPath, tailFile(p.logPath, 150))
		}
	})
	return p
}

// extenderBinary is the flextopo-extender the run uses: FLEXTOPO_EXTENDER
// (relative to the repository root when not absolute), else
// build/flextopo-extender.
func extenderBinary(root string) string {
	bin := os.Getenv("FLEXTOPO_EXTENDER")
	if bin == "" {
		return filepath.Join(root, "build", "flextopo-extender")
	}
	if !filepath.IsAbs(bin) {
		return filepath.Join(root, bin)
	}
	return bin
}

// exited reports whether the process is gone, and how it ended.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.waitErr
	default:
		return false, nil
	}
}

// checkAlive returns an error naming the process when it has exited.
func (p *process) checkAlive() error {
	if gone, err := p.exited(); gone {
		if err == nil {
			err = errors.New("exit status 0")
		}
		return fmt.Errorf("%s exited (%v); log %s:\n%s", p.name, err, p.logPath, tailFile(p.logPath, 60))
	}
	return nil
}

// stop sends SIGTERM, waits up to grace, then kills.
func (p *process) stop(grace time.Duration) {
	if p == nil {
		return
	}
	if gone, _ := p.exited(); !gone {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	p.logFile.Close()
}

// freePort asks the kernel for a free TCP port on 127.0.0.1. Ports already
// handed out by this run are never returned twice.
var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

func freePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsUsed[port] {
			portsUsed[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no free port found")
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// tailFile returns the last n lines of a file (or a note why it cannot).
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	ring := make([]string, 0, n)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	skipped := 0
	for sc.Scan() {
		if len(ring) == n {
			ring = ring[1:]
			skipped++
		}
		ring = append(ring, sc.Text())
	}
	var b strings.Builder
	if skipped > 0 {
		fmt.Fprintf(&b, "... (%d earlier lines in %s)\n", skipped, path)
	}
	for _, l := range ring {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
