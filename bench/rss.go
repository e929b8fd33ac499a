package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// ResetPeakRSS resets the kernel's peak RSS of this process (VmHWM, Linux
// only), so that PeakRSS measures what follows. On error PeakRSS covers
// the whole process so far.
func ResetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// PeakRSS returns VmHWM of this process in bytes, -1 when unknown.
func PeakRSS() int64 { return peakRSSOf("self") }

// PeakRSSOf returns VmHWM of process pid in bytes, -1 when unknown.
func PeakRSSOf(pid int) int64 { return peakRSSOf(strconv.Itoa(pid)) }

func peakRSSOf(proc string) int64 {
	f, err := os.Open("/proc/" + proc + "/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		kb, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
		if err != nil {
			return -1
		}
		return n << 10
	}
	return -1
}
