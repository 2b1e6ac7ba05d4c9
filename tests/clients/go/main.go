// The pages of a shop's search sent by opensearch-go v4 (its opensearchapi client, request
// compression on) to the URL given: a match with operator and on one field, a range filter, a
// terms facet on a keyword field, highlighting, from/size paging.
//
// Arguments: the server's URL and the search as a JSON object (index, field, text, filter_field,
// filter_max, facet, facet_field, froms: the first hit of each page, size). The environment
// variable ESBRIDGE_TEST_HEADERS holds the headers to send with every request (a JSON object; the
// credentials, if any). Prints one JSON object: each page's hits in order (id, score, highlight),
// total and facet buckets, and what went over the wire with each request in turn (the request's
// and the answer's Content-Encoding, the answer's X-Esbridge-Reranked as the client hands it on).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
)

// spec is the search the program sends, one page from each of Froms.
type spec struct {
	Index       string `json:"index"`
	Field       string `json:"field"`
	Text        string `json:"text"`
	FilterField string `json:"filter_field"`
	FilterMax   int    `json:"filter_max"`
	Facet       string `json:"facet"`
	FacetField  string `json:"facet_field"`
	Froms       []int  `json:"froms"`
	Size        int    `json:"size"`
}

// wire records the Content-Encoding of the client's searches and of their answers, in turn,
// changing nothing (the client's own requests, such as its health checks of a node, are left out).
type wire struct {
	next      http.RoundTripper
	mu        sync.Mutex
	requests  []string
	responses []string
}

func (w *wire) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(req)
	if !strings.HasSuffix(req.URL.Path, "/_search") {
		return resp, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.requests = append(w.requests, req.Header.Get("Content-Encoding"))
	switch {
	case err != nil:
		w.responses = append(w.responses, "")
	case resp.Uncompressed: // net/http asked for gzip itself and unpacked the answer
		w.responses = append(w.responses, "gzip")
	default:
		w.responses = append(w.responses, resp.Header.Get("Content-Encoding"))
	}
	return resp, err
}

type hitOut struct {
	ID        string              `json:"id"`
	Score     float32             `json:"score"`
	Highlight map[string][]string `json:"highlight"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: searchpage URL SEARCH_JSON")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(url, searchJSON string) error {
	var p spec
	if err := json.Unmarshal([]byte(searchJSON), &p); err != nil {
		return fmt.Errorf("the search: %w", err)
	}
	header := http.Header{}
	if given := os.Getenv("ESBRIDGE_TEST_HEADERS"); given != "" {
		var headers map[string]string
		if err := json.Unmarshal([]byte(given), &headers); err != nil {
			return fmt.Errorf("ESBRIDGE_TEST_HEADERS: %w", err)
		}
		for name, value := range headers {
			header.Set(name, value)
		}
	}
	seen := &wire{next: http.DefaultTransport}
	client, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{
		Addresses:           []string{url},
		Header:              header,
		CompressRequestBody: true,
		Transport:           seen,
	}})
	if err != nil {
		return err
	}

	pages := []map[string]any{}
	reranked := []string{}
	for _, from := range p.Froms {
		resp, err := search(client, p, from)
		if err != nil {
			return err
		}
		got, err := pageOf(resp, p.Facet)
		if err != nil {
			return err
		}
		pages = append(pages, got)
		// the answer's header, as the client hands it to the application
		reranked = append(reranked, resp.Inspect().Response.Header.Get("X-Esbridge-Reranked"))
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"pages": pages, "request_encodings": seen.requests,
		"response_encodings": seen.responses, "reranked": reranked})
}

// search sends the page of p starting at hit from.
func search(client *opensearchapi.Client, p spec, from int) (*opensearchapi.SearchResp, error) {
	body, err := json.Marshal(map[string]any{
		"query": map[string]any{"bool": map[string]any{
			"must": map[string]any{"match": map[string]any{p.Field: map[string]any{
				"query": p.Text, "operator": "and"}}},
			"filter": []any{map[string]any{"range": map[string]any{p.FilterField: map[string]any{"lte": p.FilterMax}}}},
		}},
		"aggs":      map[string]any{p.Facet: map[string]any{"terms": map[string]any{"field": p.FacetField}}},
		"highlight": map[string]any{"fields": map[string]any{p.Field: map[string]any{}}},
		"from":      from,
		"size":      p.Size,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := client.Search(ctx, &opensearchapi.SearchReq{Indices: []string{p.Index}, Body: bytes.NewReader(body)})
	if err != nil {
		return nil, fmt.Errorf("the search from %d: %w", from, err)
	}
	return resp, nil
}

// pageOf is one page of the answer: its hits (id, score, highlight), total and the facet's buckets.
func pageOf(resp *opensearchapi.SearchResp, facet string) (map[string]any, error) {
	var aggs map[string]struct {
		Buckets []struct {
			Key      string `json:"key"`
			DocCount int    `json:"doc_count"`
		} `json:"buckets"`
	}
	if err := json.Unmarshal(resp.Aggregations, &aggs); err != nil {
		return nil, fmt.Errorf("the aggregations: %w", err)
	}
	hits := []hitOut{}
	for _, h := range resp.Hits.Hits {
		hits = append(hits, hitOut{ID: h.ID, Score: h.Score, Highlight: h.Highlight})
	}
	buckets := [][]any{}
	for _, b := range aggs[facet].Buckets {
		buckets = append(buckets, []any{b.Key, b.DocCount})
	}
	return map[string]any{"hits": hits, "buckets": buckets,
		"total": map[string]any{"value": resp.Hits.Total.Value, "relation": resp.Hits.Total.Relation}}, nil
}
