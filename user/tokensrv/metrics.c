// SPDX-License-Identifier: GPL-2.0
/*
 * The token server's metrics (docs/metrics.md): its counters and flows,
 * copied under the server's lock, formatted after it is released.
 */
#include <stdio.h>

#include "tokensrv.h"

static const struct sl_metric
	learning = { "sluice_tokend_learning",
		     "1 during the learn period after the start or an "
		     "election: grants renew what agents hold, nothing new." },
	leader = { "sluice_tokend_leader",
		   "1 while this server grants: always without --election; "
		   "a replica only while it leads and its etcd lease lasts." },
	term = { "sluice_tokend_term",
		 "The newest leader's term this server knows (its etcd "
		 "election revision; 0 without --election)." },
	redirects = { "sluice_tokend_redirects_total",
		      "Clients answered with a REDIRECT and closed: this "
		      "server does not lead (or no longer may grant)." },
	draining = { "sluice_tokend_draining",
		     "1 once SIGUSR1 asked the server to drain." },
	conns = { "sluice_tokend_connections", "Connections open now." },
	handshakes = { "sluice_tokend_handshakes",
		       "Connections open now that have not authenticated "
		       "(--max-handshakes at most)." },
	fd_exhausted = { "sluice_tokend_accept_fd_exhausted_total",
			 "Accepts that found no free file descriptor "
			 "(EMFILE, ENFILE): a handshake evicted for it, or "
			 "the connection closed at once." },
	accepted = { "sluice_tokend_connections_accepted_total",
		     "Connections accepted." },
	refused = { "sluice_tokend_connections_refused_total",
		    "Authenticated connections refused: over --max-conns, "
		    "from a namespace with as many node ids as it keeps, or "
		    "for a node id a live session holds." },
	closed = { "sluice_tokend_connections_closed_total",
		   "Connections the server closed: its output bound reached "
		   "(a slow reader), a handshake or final error past its "
		   "deadline, or a handshake evicted for a newer one." },
	frames = { "sluice_tokend_frames_received_total",
		   "Frames received, by type." },
	refused_frames = { "sluice_tokend_frames_refused_total",
			   "Frames refused, each closing its connection: "
			   "malformed (an unsupported protocol version "
			   "included), out of turn, a failed AUTH, or a "
			   "SYNC whose seal does not open (integrity)." },
	replies = { "sluice_tokend_sync_replies_total",
		    "SYNCs answered: with grants, with KEEP (the namespace is "
		    "over --ns-rate: leases kept, nothing new), with DRAIN." },
	reports = { "sluice_tokend_flow_reports_total",
		    "Flow entries of the SYNCs answered with grants." },
	unknown = { "sluice_tokend_unknown_flow_reports_total",
		    "Flow entries naming no flow of their namespace." },
	flow_threshold = { "sluice_tokend_flow_threshold",
			   "The flow's count per second, as its rule says "
			   "(before a warm-up ramp)." },
	flow_granted = { "sluice_tokend_flow_granted",
			 "The sum of the grants its live holders hold, per "
			 "second." },
	flow_holders = { "sluice_tokend_flow_holders",
			 "Nodes holding a live lease of the flow." },
	flow_reserved = { "sluice_tokend_flow_reserved",
			  "The fallbacks of vanished holders (leases that "
			  "ran out unrenewed), kept out of the grants for "
			  "--forget-ms, per second." },
	flow_vanished = { "sluice_tokend_flow_vanished",
			  "Vanished holders whose fallback is reserved." },
	ns_nodes = { "sluice_tokend_namespace_nodes",
		     "Node ids the namespace holds (65536 at most); one "
		     "goes once no session or lease has held it for the "
		     "lease TTL + --forget-ms." };

static void counters(struct sl_metrics *m, const struct sl_tokend_stats *st)
{
	sl_metrics_gauge(m, &conns, NULL, 0, st->conns);
	sl_metrics_gauge(m, &handshakes, NULL, 0, st->handshakes);
	sl_metrics_counter(m, &fd_exhausted, NULL, 0, st->fd_exhausted);
	sl_metrics_counter(m, &accepted, NULL, 0, st->accepted);
	sl_metrics_counter(m, &refused, SL_LABELS({ "reason", "max_conns" }),
			   st->refused_busy);
	sl_metrics_counter(m, &refused, SL_LABELS({ "reason", "max_nodes" }),
			   st->refused_nodes);
	sl_metrics_counter(m, &refused, SL_LABELS({ "reason", "node_held" }),
			   st->refused_node_held);
	sl_metrics_counter(m, &closed, SL_LABELS({ "reason", "slow" }),
			   st->dropped_slow);
	sl_metrics_counter(m, &closed, SL_LABELS({ "reason", "timeout" }),
			   st->timed_out);
	sl_metrics_counter(m, &closed, SL_LABELS({ "reason", "evicted" }),
			   st->evicted);
	sl_metrics_counter(m, &frames, SL_LABELS({ "type", "hello" }),
			   st->hellos);
	sl_metrics_counter(m, &frames, SL_LABELS({ "type", "auth" }),
			   st->auth_ok + st->auth_failed);
	sl_metrics_counter(m, &frames, SL_LABELS({ "type", "sync" }),
			   st->syncs);
	sl_metrics_counter(m, &refused_frames,
			   SL_LABELS({ "reason", "malformed" }), st->malformed);
	sl_metrics_counter(m, &refused_frames,
			   SL_LABELS({ "reason", "unexpected" }),
			   st->unexpected);
	sl_metrics_counter(m, &refused_frames,
			   SL_LABELS({ "reason", "auth_failed" }),
			   st->auth_failed);
	sl_metrics_counter(m, &refused_frames,
			   SL_LABELS({ "reason", "integrity" }), st->integrity);
	sl_metrics_counter(m, &replies, SL_LABELS({ "kind", "grants" }),
			   st->syncs - st->keep_replies - st->drain_replies);
	sl_metrics_counter(m, &replies, SL_LABELS({ "kind", "keep" }),
			   st->keep_replies);
	sl_metrics_counter(m, &replies, SL_LABELS({ "kind", "drain" }),
			   st->drain_replies);
	sl_metrics_counter(m, &reports, NULL, 0, st->flow_updates);
	sl_metrics_counter(m, &unknown, NULL, 0, st->unknown_flows);
}

static void flows(struct sl_metrics *m, const struct sl_tokend_info *in)
{
	static const struct sl_metric *const per_flow[] = {
		&flow_threshold, &flow_granted, &flow_holders,
		&flow_reserved, &flow_vanished,
	};

	for (size_t k = 0; k < ARRAY_SIZE(per_flow); k++) {
		for (size_t i = 0; i < in->n_flows; i++) {
			const struct sl_tokend_flow_info *f = &in->flows[i];
			const uint64_t v[] = { f->count, f->granted,
					       f->holders, f->reserved,
					       f->vanished };
			char id[12];

			snprintf(id, sizeof(id), "%u", f->flow_id);
			sl_metrics_gauge(m, per_flow[k],
					 SL_LABELS({ "namespace", f->ns },
						   { "flow_id", id },
						   { "rule", f->rule }),
					 v[k]);
		}
	}
	for (size_t i = 0; i < in->n_ns; i++)
		sl_metrics_gauge(m, &ns_nodes,
				 SL_LABELS({ "namespace", in->ns[i].name }),
				 in->ns[i].nodes);
}

int sl_tokend_metrics(struct sl_tokend *td, struct sl_metrics *m)
{
	struct sl_tokend_info in;
	int err = sl_tokend_get_info(td, &in);

	if (err)
		return err;
	sl_metrics_gauge(m, &learning, NULL, 0, in.learning);
	sl_metrics_gauge(m, &draining, NULL, 0, in.draining);
	sl_metrics_gauge(m, &leader, NULL, 0, in.serving);
	sl_metrics_gauge(m, &term, NULL, 0, in.term);
	sl_metrics_counter(m, &redirects, NULL, 0, in.st.redirects);
	counters(m, &in.st);
	flows(m, &in);
	sl_tokend_info_free(&in);
	return 0;
}
