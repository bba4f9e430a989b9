// Package harness starts and stops the real components that the end-to-end
// tests (test/e2e) and the preemption study (test/e2e/study) run against:
// etcd, kube-apiserver and kube-scheduler from the k8s-testenv binary, and
// flextopo-extender processes, each child with its output in a log file;
// and the small Kubernetes and numeric helpers both share.
package harness

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

// Process is one child of the test: a control-plane component or the
// extender, with its output in a log file.
type Process struct {
	Name    string
	LogPath string
	// MetricsURL is a kube-scheduler's /metrics, open to any loopback
	// client (--authorization-always-allow-paths); "" for other processes.
	MetricsURL string
	cmd        *exec.Cmd
	logFile    *os.File
	done       chan struct{} // closed when the process has exited
	mu         sync.Mutex
	waitErr    error
}

func StartProcess(name, logPath, bin string, args ...string) (*Process, error) {
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
	p := &Process{Name: name, cmd: cmd, LogPath: logPath, logFile: f, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// TestProcess starts a process that belongs to one test and stops it
// (showing its log on failure) when the test ends.
func TestProcess(t *testing.T, name, dir, bin string, args ...string) *Process {
	t.Helper()
	p, err := StartProcess(name, filepath.Join(dir, name+".log"), bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(15 * time.Second)
		if t.Failed() {
			t.Logf("%s log (%s):\n%s", name, p.LogPath, TailFile(p.LogPath, 150))
		}
	})
	return p
}

// ExtenderBinary is the flextopo-extender the run uses: FLEXTOPO_EXTENDER
// (relative to the repository root when not absolute), else
// build/flextopo-extender.
func ExtenderBinary(root string) string {
	return binary(root, "FLEXTOPO_EXTENDER", "flextopo-extender")
}

// SchedulerBinary is the flextopo-scheduler the run uses (scripts/
// build-scheduler.sh builds it): FLEXTOPO_SCHEDULER (relative to the
// repository root when not absolute), else build/flextopo-scheduler.
func SchedulerBinary(root string) string {
	return binary(root, "FLEXTOPO_SCHEDULER", "flextopo-scheduler")
}

func binary(root, env, name string) string {
	bin := os.Getenv(env)
	if bin == "" {
		return filepath.Join(root, "build", name)
	}
	if !filepath.IsAbs(bin) {
		return filepath.Join(root, bin)
	}
	return bin
}

// Exited reports whether the process is gone, and how it ended.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Pid is the process id, or 0 before the process started.
func (p *Process) Pid() int {
	if p == nil || p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// CheckAlive returns an error naming the process when it has exited.
func (p *Process) CheckAlive() error {
	if gone, err := p.Exited(); gone {
		if err == nil {
			err = errors.New("exit status 0")
		}
		return fmt.Errorf("%s exited (%v); log %s:\n%s", p.Name, err, p.LogPath, TailFile(p.LogPath, 60))
	}
	return nil
}

// Kill sends SIGKILL, as a crash would end the process, and waits for it.
func (p *Process) Kill() {
	if gone, _ := p.Exited(); !gone {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Signal sends sig to the process: SIGSTOP freezes it as a hung disk or a
// stalled VM would, SIGCONT lets it go on.
func (p *Process) Signal(sig os.Signal) error {
	if gone, _ := p.Exited(); gone {
		return fmt.Errorf("%s has exited", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

// Stop sends SIGTERM, waits up to grace, then kills.
func (p *Process) Stop(grace time.Duration) {
	if p == nil {
		return
	}
	if gone, _ := p.Exited(); !gone {
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

// FreePort asks the kernel for a free TCP port on 127.0.0.1. Ports already
// handed out by this run are never returned twice.
var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

func FreePort() (int, error) {
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

// HostPort is 127.0.0.1:port.
func HostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// TailFile returns the last n lines of a file (or a note why it cannot).
func TailFile(path string, n int) string {
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
