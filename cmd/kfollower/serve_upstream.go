package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/kfollower/kfollower/authz"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// upstreamACLs keeps an authz.Store in step with the cluster's own ACLs
// (--serve-acl-upstream): every refresh interval one DescribeAcls for all
// of them, as kfollower's principal (which needs DESCRIBE on the
// CLUSTER). Until the first answer every request is denied; a refresh
// that fails keeps the last rules, and /status says since when.
type upstreamACLs struct {
	store    authz.Store
	interval time.Duration

	mu      sync.Mutex
	loaded  time.Time // of the rules in force; zero before the first
	lastErr error
}

// refresh asks the cluster once and puts its rules in force.
func (u *upstreamACLs) refresh(ctx context.Context, cl *kgo.Client) error {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err == nil && resp.ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.ErrorCode)
		if resp.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
		}
	}
	if err == nil {
		var r *authz.Rules
		if r, err = authz.NewRules(upstreamEntries(resp)); err == nil {
			u.store.Set(r)
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.lastErr = err
	if err == nil {
		u.loaded = time.Now()
	}
	if err != nil {
		return fmt.Errorf("DescribeAcls on the cluster: %w", err)
	}
	return nil
}

// upstreamEntries turns the cluster's ACLs into the entries that decide
// READ and DESCRIBE: READ, DESCRIBE and ALL as they are, and an ALLOW of
// WRITE, DELETE or ALTER as ALLOW DESCRIBE, which Kafka implies from
// them (AclAuthorizer); other operations, principals of a type other than
// User, and resource types other than TOPIC, GROUP and CLUSTER decide
// nothing here and are left out.
func upstreamEntries(resp *kmsg.DescribeACLsResponse) []authz.Entry {
	var out []authz.Entry
	for _, r := range resp.Resources {
		var rt authz.ResourceType
		switch r.ResourceType {
		case kmsg.ACLResourceTypeTopic:
			rt = authz.Topic
		case kmsg.ACLResourceTypeGroup:
			rt = authz.Group
		case kmsg.ACLResourceTypeCluster:
			rt = authz.Cluster
		default:
			continue
		}
		var pat authz.Pattern
		switch r.ResourcePatternType {
		case kmsg.ACLResourcePatternTypeLiteral:
			pat = authz.Literal
		case kmsg.ACLResourcePatternTypePrefixed:
			pat = authz.Prefixed
		default:
			continue
		}
		for _, a := range r.ACLs {
			if !strings.HasPrefix(a.Principal, "User:") {
				continue
			}
			e := authz.Entry{Principal: a.Principal, Host: a.Host, Type: rt, Pattern: pat, Name: r.ResourceName}
			switch a.PermissionType {
			case kmsg.ACLPermissionTypeAllow:
				e.Permission = authz.Allow
			case kmsg.ACLPermissionTypeDeny:
				e.Permission = authz.Deny
			default:
				continue
			}
			switch a.Operation {
			case kmsg.ACLOperationAll:
				e.Op = authz.All
			case kmsg.ACLOperationRead:
				e.Op = authz.Read
			case kmsg.ACLOperationDescribe:
				e.Op = authz.Describe
			case kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
				if e.Permission != authz.Allow {
					continue
				}
				e.Op = authz.Describe
			default:
				continue
			}
			if e.Host == "" {
				e.Host = authz.Wildcard
			}
			if e.Type == authz.Cluster && (e.Pattern != authz.Literal || e.Name != authz.ClusterName) {
				continue
			}
			out = append(out, e)
		}
	}
	return out
}

// run refreshes every interval until ctx ends, logging a failure when it
// starts and the recovery.
func (u *upstreamACLs) run(ctx context.Context, cl *kgo.Client, logger *slog.Logger) {
	t := time.NewTicker(u.interval)
	defer t.Stop()
	failing := false
	for {
		err := u.refresh(ctx, cl)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			failing = true
			logger.Error("reading the cluster's ACLs; the last rules stay in force (none before the first read: every request is denied)", "err", err, "retry_every", u.interval)
		case err == nil && failing:
			failing = false
			logger.Info("the cluster's ACLs read again", "entries", len(u.store.Rules().Entries()))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// status is the upstream mode's part of /status.
func (u *upstreamACLs) status() (loaded time.Time, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.loaded, u.lastErr
}
