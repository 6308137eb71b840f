// Package authz is who a served client is and what it may read: Kafka
// principals from SASL credentials or client certificates, and ACLs with
// Kafka's semantics, for wire/server to ask.
//
//   - Principals are "User:<name>". A client certificate maps through
//     rules in the form of Kafka's ssl.principal.mapping.rules
//     (SslPrincipalMapper): RULE:pattern/replacement/[LU] and DEFAULT (the
//     subject's RFC 2253 name), first full match wins, none is an
//     authentication failure.
//   - Credentials are read from a file (ParseCredentials); passwords are
//     salted and hashed as they load and only SCRAM's stored and server
//     keys are kept, so no password stays in memory or reaches a log.
//     PLAIN checks the password against the same keys.
//   - ACLs (ParseACLs, Rules.Authorize) are AclAuthorizer's and
//     StandardAuthorizer's: an entry matches by principal (or User:*),
//     host (or *), resource type, and name (LITERAL, the LITERAL wildcard *,
//     or PREFIXED); any matching DENY wins; otherwise a matching ALLOW
//     grants, READ (or ALL) implying DESCRIBE; otherwise the answer is no
//     (allow.everyone.if.no.acl.found=false).
//   - A Store holds the rules in force; File reloads them from disk and
//     keeps the old ones when the new file has any invalid entry.
//
// May import: the standard library and github.com/xdg-go/scram; nothing of
// this module.
package authz
