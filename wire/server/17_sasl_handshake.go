package server

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake (key 17): v0-1. Broker side:
// SaslServerAuthenticator.handleHandshakeRequest, and
// KafkaApis.handleSaslHandshakeRequest once authenticated.
//
//   - With Config.SASL, the first request after any ApiVersions: a
//     mechanism offered answers the offered list, and the connection then
//     takes SaslAuthenticate (v1, KIP-152) or bare SASL tokens (v0); one
//     not offered is UNSUPPORTED_SASL_MECHANISM with the list, and the
//     connection closes after the answer.
//   - Without Config.SASL, or again after authenticating:
//     ILLEGAL_SASL_STATE, the connection stays.

func init() { register(saslHandshakeKey, 0, handleSaslHandshake) }

func handleSaslHandshake(_ context.Context, cc *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	sasl := cc.s.cfg.SASL
	if sasl == nil || cc.auth != authHandshake {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	resp.SupportedMechanisms = sasl.Mechanisms()
	x, ok := sasl.Start(req.Mechanism)
	if !ok {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		cc.s.obs.Authenticated("unsupported", false) // not the client's string: a label of few values
		cc.closeAfter = fmt.Errorf("%w: SASL mechanism %q not offered (%v)", errAuthFailed, req.Mechanism, resp.SupportedMechanisms)
		return resp, nil
	}
	cc.exchange, cc.mechanism = x, req.Mechanism
	cc.auth = authExchange
	if req.Version == 0 {
		cc.auth = authRawTokens
	}
	return resp, nil
}
