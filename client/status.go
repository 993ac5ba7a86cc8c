package client

import (
	"context"
	"encoding/json"
	"net/http"
)

// Status is GET /v1/status's main fields (docs/contract.md §8); fields the client does
// not name are ignored, and Raw holds the whole document for them.
type Status struct {
	Node       StatusNode       `json:"node"`
	Origins    []StatusOrigin   `json:"origins"`
	Peers      []StatusPeer     `json:"peers"`
	Counters   Counters         `json:"counters"`
	ClusterMap StatusClusterMap `json:"cluster_map"`
	// Raw is the document as the node sent it.
	Raw []byte `json:"-"`
}

// StatusNode is the status's node (docs/contract.md §8.1).
type StatusNode struct {
	Name     string `json:"name"`
	Origin   string `json:"origin"` // the origin id, 32 hex digits
	Protocol struct {
		Min, Max uint64
	} `json:"protocol"`
	Authenticated bool `json:"authenticated"`
	Clock         struct {
		OffsetMs       *float64 `json:"offset_ms"`
		MeasuredPeers  int      `json:"measured_peers"`
		OffPeers       int      `json:"off_peers"`
		BoundMs        int64    `json:"bound_ms"`
		RefusingWrites bool     `json:"refusing_writes"`
	} `json:"clock"`
	Storage struct {
		State   string `json:"state"` // "ok" or "degraded"
		Code    string `json:"code"`  // while degraded: storage-full or storage-failed
		Message string `json:"message"`
		Since   string `json:"since"`
		Retries uint64 `json:"retries"`
	} `json:"storage"`
	// Rewound is not nil while the node's own origin is rewound (§21): it refuses writes.
	Rewound *struct {
		Peer   string `json:"peer"`
		Seq    uint64 `json:"seq"`
		OwnSeq uint64 `json:"own_seq"`
		How    string `json:"how"`
		At     string `json:"at"`
	} `json:"rewound"`
}

// StatusOrigin is one origin of the status (docs/contract.md §8.2).
type StatusOrigin struct {
	Origin     string  `json:"origin"`
	Name       string  `json:"name"`
	AppliedSeq uint64  `json:"applied_seq"`
	HeadSeq    uint64  `json:"head_seq"`
	LagSeq     uint64  `json:"lag_seq"`
	LagMs      uint64  `json:"lag_ms"`
	Health     string  `json:"health"`
	SourcePeer string  `json:"source_peer"`
	Diverged   bool    `json:"diverged"`
	FloorSeq   uint64  `json:"floor_seq"`
	Stuck      *string `json:"stuck"`
}

// StatusPeer is one peer of the status (docs/contract.md §8.3).
type StatusPeer struct {
	Name      string  `json:"name"`
	URL       string  `json:"url"`
	State     string  `json:"state"`
	Health    string  `json:"health"`
	Connected bool    `json:"connected"`
	Version   uint64  `json:"version"`
	LagSeq    *uint64 `json:"lag_seq"`
	RTTMs     float64 `json:"rtt_ms"`
	Mode      string  `json:"mode"`
}

// StatusClusterMap is the status's cluster_map (docs/contract.md §8.8, §22.4).
type StatusClusterMap struct {
	Generation uint64              `json:"generation"`
	Publisher  string              `json:"publisher"`
	Members    []string            `json:"members"`
	Placement  map[string][]string `json:"placement"`
	Carried    []string            `json:"carried"`
}

// Status reads GET /v1/status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	cl := c.newCall(http.MethodGet, "/v1/status", read, nil)
	cl.limit = 64 << 20 // a status lists every origin and peer: generous, still a bound
	_, body, err := c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	s := &Status{Raw: body}
	if err := decode(cl, body, s); err != nil {
		return nil, err
	}
	return s, nil
}

// Counters are the status's counters by name (docs/contract.md §8.4). A counter added
// later decodes as the others; an entry that is not a whole number is left out rather
// than failing the whole document.
type Counters map[string]uint64

// UnmarshalJSON takes every entry that is a whole number.
func (c *Counters) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*c = make(Counters, len(raw))
	for k, v := range raw {
		var n uint64
		if json.Unmarshal(v, &n) == nil {
			(*c)[k] = n
		}
	}
	return nil
}
