package cluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Capabilities is what a chart's .Capabilities says of the API server:
// its version, and every API version it serves ("apps/v1") with each of
// its kinds ("apps/v1/Deployment"), as Helm lists them. From the cached
// discovery the RESTMapper reads, and the version asked at most once per
// RediscoverAfter.
func (c *Client) Capabilities(ctx context.Context) (string, []string, error) {
	c.versionMu.Lock()
	version := c.version
	if version == "" || c.now().Sub(c.versionAt) > RediscoverAfter {
		v, err := c.disc.ServerVersion()
		if err != nil {
			c.versionMu.Unlock()
			return "", nil, fmt.Errorf("server version: %w", err)
		}
		version, c.version, c.versionAt = v.GitVersion, v.GitVersion, c.now()
	}
	c.versionMu.Unlock()
	_, lists, err := c.disc.ServerGroupsAndResources()
	if err != nil && len(lists) == 0 {
		return "", nil, fmt.Errorf("server API versions: %w", err)
	}
	var versions []string
	for _, l := range lists {
		versions = append(versions, l.GroupVersion)
		for _, r := range l.APIResources {
			versions = append(versions, l.GroupVersion+"/"+r.Kind)
		}
	}
	slices.Sort(versions)
	return version, slices.Compact(versions), nil
}

var gvrSecret = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// seedKey is the key of the seed Secret's data.
const seedKey = "seed"

// Seed returns the instance's secret seed, the data of the immutable
// Secret name in the namespace, creating it (32 random bytes) when it does
// not exist and create is true; two processes that create it at once end
// with the same one. It is read once per process.
func (c *Client) Seed(ctx context.Context, name string, create bool) ([]byte, error) {
	c.seedMu.Lock()
	defer c.seedMu.Unlock()
	if c.seed != nil {
		return c.seed, nil
	}
	res := c.dyn.Resource(gvrSecret).Namespace(c.namespace)
	for range 2 {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			s, _, _ := unstructured.NestedString(u.Object, "data", seedKey)
			seed, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(seed) < 16 {
				return nil, fmt.Errorf("secret %s: no seed of at least 16 bytes under data.%s; delete it and recond makes a new one (a chart's generated values then change)", name, seedKey)
			}
			c.seed = seed
			return seed, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("secret %s: %w", name, err)
		}
		if !create {
			return nil, fmt.Errorf("secret %s does not exist yet: the first `recond run` or `recond sync` that renders the chart makes it (this command writes nothing)", name)
		}
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata":  map[string]any{"name": name, "namespace": c.namespace},
			"immutable": true,
			"type":      "Opaque",
			"data":      map[string]any{seedKey: base64.StdEncoding.EncodeToString(b)},
		}}
		done, err := c.admit(ctx, Write{Purpose: PurposeSeed, Verb: VerbCreate, GVK: obj.GroupVersionKind(), Name: name, Object: obj})
		if err != nil {
			return nil, fmt.Errorf("create secret %s: %w", name, err)
		}
		_, err = res.Create(ctx, obj, metav1.CreateOptions{FieldManager: "recond"})
		done(err)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create secret %s: %w", name, err)
		}
		// Read back what the server holds: another process may have won.
	}
	return nil, fmt.Errorf("secret %s: created, then not found", name)
}
