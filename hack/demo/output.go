package main

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
)

// say prints a step's headline.
func say(format string, args ...any) {
	fmt.Printf("\n\033[1m== "+format+"\033[0m\n", args...)
}

// logOf runs cmd to its end and returns its log (stderr).
func logOf(cmd *exec.Cmd) (string, error) {
	var log strings.Builder
	cmd.Stderr = &log
	err := cmd.Run()
	return log.String(), err
}

// linesWith are the lines of log that contain any of subs.
func linesWith(log string, subs ...string) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		for _, sub := range subs {
			if strings.Contains(line, sub) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// printLines prints the lines of log that contain any of subs, indented.
func printLines(log string, subs ...string) {
	for _, line := range linesWith(log, subs...) {
		fmt.Println("  " + line)
	}
}

// printMetrics prints the series of the named metrics from a /metrics URL.
func printMetrics(url string, names ...string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var sums []string
	for _, name := range names {
		total := 0.0
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
				var v float64
				if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
					total += v
				}
			}
		}
		sums = append(sums, fmt.Sprintf("%s %g", name, total))
	}
	fmt.Println(strings.Join(sums, ", "))
	return nil
}

// field returns a key=value field of a text log line ("" when absent).
func field(line, key string) string {
	m := regexp.MustCompile(`(?:^|\s)` + regexp.QuoteMeta(key) + `=("(?:[^"\\]|\\.)*"|\S+)`).FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	return m[1]
}
