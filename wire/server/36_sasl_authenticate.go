package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate (key 36): v0-2. Broker side:
// SaslServerAuthenticator.handleSaslToken, and
// KafkaApis.handleSaslAuthenticateRequest once authenticated.
//
//   - After SaslHandshake v1: each request carries one client message of
//     the exchange and its answer the server's. A failure is
//     SASL_AUTHENTICATION_FAILED with Kafka's message (for SCRAM the same
//     whether the user is unknown or the password wrong), held back
//     Config.FailedAuthDelay; then the connection closes.
//   - SessionLifetimeMs (v1+) is 0: no re-authentication is asked for
//     (KIP-368).
//   - Before SaslHandshake the connection closes (mayAsk); once
//     authenticated, or without Config.SASL: ILLEGAL_SASL_STATE, the
//     connection stays.

func init() { register(saslAuthenticateKey, 0, handleSaslAuthenticate) }

func handleSaslAuthenticate(_ context.Context, cc *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if cc.auth != authExchange {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate request received after successful authentication")
		return resp, nil
	}
	out, msg, err := cc.step(req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(msg)
		cc.closeAfter = err
		return resp, nil
	}
	resp.SASLAuthBytes = out
	if resp.SASLAuthBytes == nil {
		resp.SASLAuthBytes = []byte{}
	}
	return resp, nil
}
