package inventory

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"flextopo.dev/node/internal/enforce"
)

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// information is the driver's file as it reads on an A100 (driver 550).
func information(uuid, bus string, minor int) string {
	return "Model: \t\t NVIDIA A100-SXM4-80GB\nIRQ:   \t\t 0\nGPU UUID: \t " + uuid +
		"\nVideo BIOS: \t 92.00.36.00.10\nBus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t " + bus +
		"\nDevice Minor: \t " + string(rune('0'+minor)) + "\nGPU Excluded:\t No\n"
}

func TestRead(t *testing.T) {
	root := t.TempDir()
	r := Roots{NvidiaProc: filepath.Join(root, "nvidia"), Sys: filepath.Join(root, "sys")}
	write(t, filepath.Join(r.NvidiaProc, "gpus/0000:07:00.0/information"), information("GPU-aaa", "0000:07:00.0", 0))
	write(t, filepath.Join(r.NvidiaProc, "gpus/0000:0f:00.0/information"), information("GPU-bbb", "0000:0f:00.0", 3))
	write(t, filepath.Join(r.Sys, "devices/system/cpu/online"), "0-3,8\n")
	write(t, filepath.Join(r.Sys, "devices/system/node/online"), "0-1\n")
	topo := `{"version":1,"sockets":[{"id":0,"numaNodes":[{"id":0,"cpus":"0-3","pcieSwitches":[{"id":"s0","gpus":[{"index":0,"uuid":"GPU-aaa","mig":{"enabled":true,"instances":[{"profile":"3g.40gb","start":0,"size":4,"uuid":"MIG-1"}]}}]}],"gpus":[{"index":1,"uuid":"GPU-bbb"}]}]}]}`
	inv, err := Read(r, topo)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(inv.GPUMinor, map[string]int{"GPU-aaa": 0, "GPU-bbb": 3}) {
		t.Errorf("GPUs %v", inv.GPUMinor)
	}
	if len(inv.CPUs) != 5 || !inv.CPUs[8] || len(inv.NUMANodes) != 2 {
		t.Errorf("CPUs %v NUMA %v", inv.CPUs, inv.NUMANodes)
	}
	if !reflect.DeepEqual(inv.MIGParent, map[string]string{"MIG-1": "GPU-aaa"}) {
		t.Errorf("MIG %v", inv.MIGParent)
	}
}

func TestReadNoDriverNoNUMA(t *testing.T) {
	root := t.TempDir()
	r := Roots{NvidiaProc: filepath.Join(root, "absent"), Sys: root}
	write(t, filepath.Join(root, "devices/system/cpu/online"), "0-1\n")
	inv, err := Read(r, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUMinor) != 0 || !inv.NUMANodes[0] || inv.MIGParent != nil {
		t.Errorf("%+v", inv)
	}
}

func TestReadErrors(t *testing.T) {
	root := t.TempDir()
	r := Roots{NvidiaProc: filepath.Join(root, "nvidia"), Sys: root}
	write(t, filepath.Join(root, "devices/system/cpu/online"), "0-1\n")
	write(t, filepath.Join(r.NvidiaProc, "gpus/0000:07:00.0/information"), "Model: x\nGPU UUID: GPU-a\nDevice Minor: zero\n")
	if _, err := Read(r, ""); err == nil || !strings.Contains(err.Error(), `Device Minor "zero"`) {
		t.Errorf("error %v", err)
	}
	write(t, filepath.Join(r.NvidiaProc, "gpus/0000:07:00.0/information"), "Model: x\n")
	if _, err := Read(r, ""); err == nil || !strings.Contains(err.Error(), "no \"GPU UUID\"") {
		t.Errorf("error %v", err)
	}
	write(t, filepath.Join(r.NvidiaProc, "gpus/0000:07:00.0/information"), information("GPU-a", "x", 0))
	if _, err := Read(r, "{not json"); err == nil || !strings.Contains(err.Error(), "flextopo.io/topology") {
		t.Errorf("error %v", err)
	}
	write(t, filepath.Join(root, "devices/system/cpu/online"), "1-0\n")
	if _, err := Read(r, ""); err == nil || !strings.Contains(err.Error(), "cpu/online") {
		t.Errorf("error %v", err)
	}
}

func TestSummarize(t *testing.T) {
	inv := &enforce.Inventory{
		GPUMinor:  map[string]int{"GPU-b": 3, "GPU-a": 0},
		CPUs:      map[int]bool{8: true, 0: true, 1: true},
		NUMANodes: map[int]bool{1: true, 0: true},
	}
	got := Summarize(inv)
	want := Summary{
		GPUs:      []SummaryGPU{{"GPU-a", 0, "/dev/nvidia0"}, {"GPU-b", 3, "/dev/nvidia3"}},
		CPUs:      []int{0, 1, 8},
		NUMANodes: []int{0, 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
}

// TestReadRealH100 reads the driver's file as it was on a real NVIDIA H100
// 80GB HBM3 with the open kernel module 580.159.04, byte for byte (tabs
// included): this driver adds a "GPU Firmware" line.
func TestReadRealH100(t *testing.T) {
	root := t.TempDir()
	r := Roots{NvidiaProc: filepath.Join(root, "nvidia"), Sys: filepath.Join(root, "sys")}
	write(t, filepath.Join(r.NvidiaProc, "gpus/0000:00:06.0/information"),
		"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 41\nGPU UUID: \t GPU-b25e4eb2-0d35-b6ef-0869-242ae5faf4b6\n"+
			"Video BIOS: \t 96.00.da.00.0c\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"+
			"Bus Location: \t 0000:00:06.0\nDevice Minor: \t 0\nGPU Firmware: \t 580.159.04\nGPU Excluded:\t No\n")
	write(t, filepath.Join(r.Sys, "devices/system/cpu/online"), "0-15\n")
	write(t, filepath.Join(r.Sys, "devices/system/node/online"), "0\n")
	inv, err := Read(r, "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(inv.GPUMinor, map[string]int{"GPU-b25e4eb2-0d35-b6ef-0869-242ae5faf4b6": 0}) {
		t.Errorf("GPUs %v", inv.GPUMinor)
	}
}
