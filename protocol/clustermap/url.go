package clustermap

import (
	"strconv"
	"strings"
)

// checkURL is the rule of a node's api URL (docs/contract.md §22.1), "" when url keeps it,
// otherwise the reason for a message. net/url is outside the purity rule (all of net/ is),
// so the rule is written here, and is narrower than what net/url parses: an http:// or
// https:// scheme in lower case, then a host (a name or an IPv4 address of
// [A-Za-z0-9._~-], or an IPv6 address in brackets) with an optional port 1 to 65535, then
// anything from the first '/', '?' or '#'. No user information: a map is shown to every
// holder of a read token, and credentials do not belong in it. Only printable ASCII, at
// most MaxURLBytes bytes.
func checkURL(url string) string {
	if len(url) > MaxURLBytes {
		return "is " + strconv.Itoa(len(url)) + " bytes, over the " + strconv.Itoa(MaxURLBytes) + " allowed"
	}
	for i := 0; i < len(url); i++ {
		if url[i] <= ' ' || url[i] > '~' {
			return "holds a space, a control character or a byte outside ASCII"
		}
	}
	rest, ok := strings.CutPrefix(url, "http://")
	if !ok {
		if rest, ok = strings.CutPrefix(url, "https://"); !ok {
			return "is not an http:// or https:// URL"
		}
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if strings.Contains(authority, "@") {
		return "carries user information"
	}
	host, port := authority, ""
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return "has an IPv6 address without its closing bracket"
		}
		host = authority[1:end]
		after := authority[end+1:]
		if after != "" {
			if after[0] != ':' {
				return "has something other than a port after its IPv6 address"
			}
			port = after[1:]
			if port == "" {
				return "has an empty port"
			}
		}
		if host == "" || strings.Trim(host, "0123456789abcdefABCDEF:.") != "" || !strings.Contains(host, ":") {
			return "has an IPv6 address that is not one"
		}
	} else {
		if i := strings.LastIndexByte(authority, ':'); i >= 0 {
			host, port = authority[:i], authority[i+1:]
			if port == "" {
				return "has an empty port"
			}
		}
		if host == "" {
			return "has no host"
		}
		for i := 0; i < len(host); i++ {
			c := host[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == '~') {
				return "has a host with " + strconv.QuoteRune(rune(c)) + ", outside [A-Za-z0-9._~-]"
			}
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || len(port) > 5 || n < 1 || n > 65535 || strings.Trim(port, "0123456789") != "" {
			return "has a port that is not 1 to 65535"
		}
	}
	return ""
}
