package framework

import (
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowestPort is the lowest port FreeAddr hands out.
const lowestPort = 10000

var (
	portsMu sync.Mutex
	handed  = map[int]bool{}
)

// FreeAddr returns a loopback address whose port is free now and lies
// below the kernel's ephemeral range (net.ipv4.ip_local_port_range), with
// the port after it below that range too. A port of the ephemeral range
// may meanwhile become the local port of an outgoing connection (the
// kube-apiserver's to etcd), and a program that binds it later (Rancher
// binds its HTTPS port and the next one on every address) then fails with
// "address already in use". No port is handed out twice by one process.
func FreeAddr() (string, error) {
	high := ephemeralLow() - 2
	if high <= lowestPort {
		return "", fmt.Errorf("the ephemeral port range starts at %d: no room below it", high+2)
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for i := 0; i < 500; i++ {
		p := lowestPort + rand.Intn(high-lowestPort+1)
		if handed[p-1] || handed[p] || handed[p+1] { // no two neighbours: Rancher also binds the next port
			continue
		}
		// Free on every address: Rancher binds its ports on all of them.
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		handed[p] = true
		return "127.0.0.1:" + strconv.Itoa(p), nil
	}
	return "", errors.New("no free port below the ephemeral range after 500 tries")
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768,
// Linux's default, when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
