package alloc

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// MaxCPU bounds the logical CPU ids a cpulist may name (the Linux kernel's
// NR_CPUS maximum is 8192).
const MaxCPU = 8191

// ParseCPUList parses a Linux cpulist ("0-3,8,10-11", the format of
// /sys/devices/system/cpu/online and cpuset.cpus) into sorted, distinct ids.
// "" is the empty set. Ranges must be ascending; ids at most MaxCPU.
func ParseCPUList(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, err := parseRange(part)
		if err != nil {
			return nil, err
		}
		for c := lo; c <= hi; c++ {
			seen[c] = true
		}
	}
	ids := make([]int, 0, len(seen))
	for c := range seen {
		ids = append(ids, c)
	}
	sort.Ints(ids)
	return ids, nil
}

func parseRange(part string) (int, int, error) {
	a, b, isRange := strings.Cut(part, "-")
	lo, err := parseCPU(a)
	if err != nil {
		return 0, 0, err
	}
	hi := lo
	if isRange {
		if hi, err = parseCPU(b); err != nil {
			return 0, 0, err
		}
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("range %q is descending", part)
	}
	return lo, hi, nil
}

func parseCPU(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a CPU id", s)
	}
	v, err := strconv.Atoi(s)
	if err != nil || v > MaxCPU {
		return 0, fmt.Errorf("CPU id %q out of range 0-%d", s, MaxCPU)
	}
	return v, nil
}

// FormatCPUList writes ids (any order, duplicates allowed) as a canonical
// cpulist with ranges ("0-3,8").
func FormatCPUList(ids []int) string {
	s := append([]int(nil), ids...)
	sort.Ints(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] <= s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if s[j] != s[i] {
			b.WriteString("-" + strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}
