-- fleetcron SQLite schema at revision 0042 (see store/sqlite_head.py)
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
INSERT INTO "alembic_version" VALUES ('0042');
CREATE TABLE audit_events (
	id INTEGER NOT NULL, 
	at DATETIME NOT NULL, 
	actor VARCHAR(64) NOT NULL, 
	action VARCHAR(64) NOT NULL, 
	success BOOLEAN NOT NULL, 
	job_id INTEGER, 
	job_name VARCHAR(64), 
	target_id INTEGER, 
	target_name VARCHAR(64), 
	detail JSON NOT NULL, project_id INTEGER, 
	CONSTRAINT pk_audit_events PRIMARY KEY (id)
);
CREATE TABLE web_sessions (
	id INTEGER NOT NULL, 
	user_id INTEGER NOT NULL, 
	token_hash VARCHAR(64) NOT NULL, 
	csrf_token VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	expires_at DATETIME NOT NULL, 
	address VARCHAR(64) NOT NULL, 
	CONSTRAINT pk_web_sessions PRIMARY KEY (id), 
	CONSTRAINT fk_web_sessions_user_id_users FOREIGN KEY(user_id) REFERENCES users (id) ON DELETE CASCADE, 
	CONSTRAINT uq_web_sessions_token_hash UNIQUE (token_hash)
);
CREATE TABLE cluster_nodes (
	id INTEGER NOT NULL, 
	node_id VARCHAR(32) NOT NULL, 
	fingerprint VARCHAR(64) NOT NULL, 
	hostname VARCHAR(255) NOT NULL, 
	version VARCHAR(64) NOT NULL, 
	endpoint VARCHAR(255) NOT NULL, 
	aliases JSON NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	announced_at DATETIME NOT NULL, 
	approved_at DATETIME, 
	approved_by VARCHAR(64), 
	retired_at DATETIME, 
	fenced_at DATETIME, drained_at DATETIME, 
	CONSTRAINT pk_cluster_nodes PRIMARY KEY (id), 
	CONSTRAINT ck_cluster_nodes_state CHECK (state IN ('candidate', 'approved', 'retired')), 
	CONSTRAINT uq_cluster_nodes_node_id UNIQUE (node_id)
);
CREATE TABLE cluster_nonces (
	nonce VARCHAR(64) NOT NULL, 
	seen_at DATETIME NOT NULL, 
	CONSTRAINT pk_cluster_nonces PRIMARY KEY (nonce)
);
CREATE TABLE cluster_secrets (
	id INTEGER NOT NULL, 
	secret_enc BLOB NOT NULL, 
	created_at DATETIME NOT NULL, 
	created_by VARCHAR(64) NOT NULL, 
	CONSTRAINT pk_cluster_secrets PRIMARY KEY (id)
);
CREATE TABLE cluster_transfers (
	id INTEGER NOT NULL, 
	idempotency_key VARCHAR(128) NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	from_node_id VARCHAR(32), 
	to_node_id VARCHAR(32) NOT NULL, 
	requested_by VARCHAR(64) NOT NULL, 
	requested_at DATETIME NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	completed_at DATETIME, 
	generation_after BIGINT, 
	note TEXT NOT NULL, 
	CONSTRAINT pk_cluster_transfers PRIMARY KEY (id), 
	CONSTRAINT uq_cluster_transfers_idempotency_key UNIQUE (idempotency_key)
);
CREATE TABLE fenced_writes (
	id INTEGER NOT NULL, 
	at DATETIME NOT NULL, 
	node_id VARCHAR(32) NOT NULL, 
	run_id BIGINT, 
	reason TEXT NOT NULL, 
	CONSTRAINT pk_fenced_writes PRIMARY KEY (id)
);
CREATE TABLE alert_states (
	assignment_id INTEGER NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	changed_at DATETIME NOT NULL, 
	CONSTRAINT pk_alert_states PRIMARY KEY (assignment_id)
);
CREATE TABLE notification_channels (
	id INTEGER NOT NULL, 
	name VARCHAR(64) NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	config JSON NOT NULL, 
	secret_enc BLOB, 
	enabled BOOLEAN NOT NULL, 
	created_at DATETIME NOT NULL, 
	CONSTRAINT pk_notification_channels PRIMARY KEY (id), 
	CONSTRAINT ck_notification_channels_kind CHECK (kind IN ('webhook', 'email')), 
	CONSTRAINT uq_notification_channels_name UNIQUE (name)
);
CREATE TABLE notification_deliveries (
	id INTEGER NOT NULL, 
	channel_id INTEGER NOT NULL, 
	event VARCHAR(16) NOT NULL, 
	payload JSON NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	attempts INTEGER NOT NULL, 
	last_error TEXT, 
	created_at DATETIME NOT NULL, 
	next_attempt_at DATETIME, 
	sent_at DATETIME, incident_id INTEGER, 
	CONSTRAINT pk_notification_deliveries PRIMARY KEY (id), 
	CONSTRAINT fk_notification_deliveries_channel_id_notification_channels FOREIGN KEY(channel_id) REFERENCES notification_channels (id) ON DELETE CASCADE
);
CREATE TABLE "execution_claims" (
	id INTEGER NOT NULL, 
	run_id BIGINT NOT NULL, 
	node_id VARCHAR(32) NOT NULL, 
	generation BIGINT NOT NULL, 
	created_at DATETIME NOT NULL, 
	deadline_at DATETIME NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	released_at DATETIME, shard INTEGER DEFAULT 0 NOT NULL, 
	CONSTRAINT pk_execution_claims PRIMARY KEY (id), 
	CONSTRAINT ck_execution_claims_state CHECK (state IN ('live', 'done', 'expired', 'revoked', 'cleared'))
);
CREATE TABLE "job_versions" (
	id INTEGER NOT NULL, 
	job_id INTEGER NOT NULL, 
	job_name VARCHAR(64) NOT NULL, 
	version INTEGER NOT NULL, 
	definition JSON NOT NULL, 
	changed JSON NOT NULL, 
	source VARCHAR(16) NOT NULL, 
	actor VARCHAR(64) NOT NULL, 
	at DATETIME NOT NULL, 
	summary TEXT NOT NULL, 
	job_created_at DATETIME NOT NULL, 
	CONSTRAINT pk_job_versions PRIMARY KEY (id), 
	CONSTRAINT uq_job_versions_job_id UNIQUE (job_id, job_created_at, version)
);
CREATE VIRTUAL TABLE runs_fts USING fts5(stdout_head, stdout_tail, stderr_head, stderr_tail, error, content='runs', content_rowid='id', tokenize='trigram');
CREATE TABLE "assignments" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	job_id INTEGER NOT NULL, 
	target_id INTEGER NOT NULL, 
	enabled BOOLEAN NOT NULL, 
	last_fire_at DATETIME, 
	next_fire_at DATETIME, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, newest_run_id BIGINT, newest_status VARCHAR(16), newest_finished_run_id BIGINT, newest_finished_status VARCHAR(16), 
	CONSTRAINT fk_assignments_job_id_jobs FOREIGN KEY(job_id) REFERENCES jobs (id) ON DELETE CASCADE, 
	CONSTRAINT uq_assignments_job_target UNIQUE (job_id, target_id), 
	CONSTRAINT fk_assignments_target_id_targets FOREIGN KEY(target_id) REFERENCES targets (id) ON DELETE CASCADE
);
CREATE TABLE "runs" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	assignment_id INTEGER NOT NULL, 
	job_id INTEGER NOT NULL, 
	target_id INTEGER NOT NULL, 
	job_name VARCHAR(64) NOT NULL, 
	target_name VARCHAR(64) NOT NULL, 
	origin VARCHAR(16) NOT NULL, 
	command TEXT NOT NULL, 
	scheduled_for DATETIME NOT NULL, 
	"trigger" VARCHAR(16) NOT NULL, 
	attempt INTEGER NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	reason TEXT, 
	exit_code INTEGER, 
	stdout_head TEXT NOT NULL, 
	stdout_tail TEXT NOT NULL, 
	stdout_bytes BIGINT NOT NULL, 
	stdout_truncated BOOLEAN NOT NULL, 
	stderr_head TEXT NOT NULL, 
	stderr_tail TEXT NOT NULL, 
	stderr_bytes BIGINT NOT NULL, 
	stderr_truncated BOOLEAN NOT NULL, 
	error TEXT, 
	started_at DATETIME, 
	finished_at DATETIME, 
	duration_ms INTEGER, 
	deadline_at DATETIME, 
	node VARCHAR(255) NOT NULL, 
	actor VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	generation BIGINT, 
	claim_id BIGINT, 
	skip_kind VARCHAR(24), 
	job_version INTEGER, 
	stop_requested_by VARCHAR(64), 
	stop_requested_at DATETIME, 
	live_output TEXT, 
	live_bytes BIGINT, 
	live_at DATETIME, not_before DATETIME, shard INTEGER DEFAULT 0 NOT NULL, 
	CONSTRAINT uq_runs_slot UNIQUE (assignment_id, scheduled_for, attempt)
);
CREATE TABLE incidents (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	job_id INTEGER NOT NULL, 
	job_name VARCHAR(64) NOT NULL, 
	cause VARCHAR(16) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	opened_at DATETIME NOT NULL, 
	resolved_at DATETIME, 
	previous_state VARCHAR(16) NOT NULL, 
	reason TEXT NOT NULL, 
	first_run_id BIGINT, 
	acked_at DATETIME, 
	acked_by VARCHAR(64), 
	ack_note TEXT, 
	flapping_at DATETIME, target_id INTEGER, target_name VARCHAR(64), project_id INTEGER DEFAULT 1 NOT NULL, 
	CONSTRAINT ck_incidents_status CHECK (status IN ('open', 'resolved'))
);
CREATE TABLE incident_targets (
	incident_id INTEGER NOT NULL, 
	assignment_id INTEGER NOT NULL, 
	target_id INTEGER NOT NULL, 
	target_name VARCHAR(64) NOT NULL, 
	joined_at DATETIME NOT NULL, 
	last_seen_at DATETIME NOT NULL, 
	recovered_at DATETIME, 
	CONSTRAINT pk_incident_targets PRIMARY KEY (incident_id, assignment_id), 
	CONSTRAINT fk_incident_targets_incident_id_incidents FOREIGN KEY(incident_id) REFERENCES incidents (id) ON DELETE CASCADE
);
CREATE TABLE incident_notices (
	incident_id INTEGER NOT NULL, 
	channel_id INTEGER NOT NULL, 
	last_sent_at DATETIME, 
	notified JSON NOT NULL, 
	messages INTEGER NOT NULL, 
	closed BOOLEAN NOT NULL, 
	CONSTRAINT pk_incident_notices PRIMARY KEY (incident_id, channel_id), 
	CONSTRAINT fk_incident_notices_incident_id_incidents FOREIGN KEY(incident_id) REFERENCES incidents (id) ON DELETE CASCADE, 
	CONSTRAINT fk_incident_notices_channel_id_notification_channels FOREIGN KEY(channel_id) REFERENCES notification_channels (id) ON DELETE CASCADE
);
CREATE TABLE calendars (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	name VARCHAR(64) NOT NULL, 
	description TEXT NOT NULL, 
	weekdays VARCHAR(32) NOT NULL, 
	except_name VARCHAR(64), 
	source VARCHAR(8) NOT NULL, 
	created_by VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_by VARCHAR(64) NOT NULL, 
	updated_at DATETIME NOT NULL, 
	CONSTRAINT uq_calendars_name UNIQUE (name)
);
CREATE TABLE calendar_dates (
	calendar_id INTEGER NOT NULL, 
	day DATE NOT NULL, 
	CONSTRAINT pk_calendar_dates PRIMARY KEY (calendar_id, day), 
	CONSTRAINT fk_calendar_dates_calendar_id_calendars FOREIGN KEY(calendar_id) REFERENCES calendars (id) ON DELETE CASCADE
);
CREATE TABLE host_trust_rules (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	selector VARCHAR(512) NOT NULL, 
	host_ca TEXT NOT NULL, 
	created_by VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	CONSTRAINT uq_host_trust_rules_selector UNIQUE (selector)
);
CREATE TABLE sso_logins (
	id INTEGER NOT NULL, 
	state_hash VARCHAR(64) NOT NULL, 
	nonce VARCHAR(64) NOT NULL, 
	code_verifier VARCHAR(128) NOT NULL, 
	next_path VARCHAR(2000) NOT NULL, 
	created_at DATETIME NOT NULL, 
	expires_at DATETIME NOT NULL, 
	CONSTRAINT pk_sso_logins PRIMARY KEY (id), 
	CONSTRAINT uq_sso_logins_state_hash UNIQUE (state_hash)
);
CREATE TABLE projects (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	name VARCHAR(64) NOT NULL, 
	description TEXT NOT NULL, 
	created_by VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	CONSTRAINT uq_projects_name UNIQUE (name)
);
INSERT INTO "projects" VALUES (1, 'default', 'The project every object of an install starts in.', 'system', CURRENT_TIMESTAMP);
CREATE TABLE target_shares (
	target_id INTEGER NOT NULL, 
	project_id INTEGER NOT NULL, 
	shared_by VARCHAR(64) NOT NULL, 
	shared_at DATETIME NOT NULL, 
	CONSTRAINT pk_target_shares PRIMARY KEY (target_id, project_id), 
	CONSTRAINT fk_target_shares_target_id_targets FOREIGN KEY(target_id) REFERENCES targets (id) ON DELETE CASCADE, 
	CONSTRAINT fk_target_shares_project_id_projects FOREIGN KEY(project_id) REFERENCES projects (id) ON DELETE CASCADE
);
CREATE TABLE "jobs" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	name VARCHAR(64) NOT NULL, 
	origin VARCHAR(16) NOT NULL, 
	schedule VARCHAR(255) NOT NULL, 
	timezone VARCHAR(64) NOT NULL, 
	command TEXT NOT NULL, 
	notes TEXT NOT NULL, 
	selector JSON NOT NULL, 
	target_id INTEGER, 
	timeout_s INTEGER NOT NULL, 
	overlap VARCHAR(8) NOT NULL, 
	catchup VARCHAR(8) NOT NULL, 
	jitter_s INTEGER NOT NULL, 
	retries INTEGER NOT NULL, 
	retry_on JSON NOT NULL, 
	retry_backoff_s INTEGER NOT NULL, 
	created_by VARCHAR(64) NOT NULL, 
	updated_by VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	allow_duplicate BOOLEAN DEFAULT 0 NOT NULL, 
	version INTEGER DEFAULT '0' NOT NULL, 
	batch VARCHAR(8) DEFAULT ('') NOT NULL, 
	batch_pause_s INTEGER DEFAULT '0' NOT NULL, 
	max_failures VARCHAR(8) DEFAULT ('') NOT NULL, 
	canary TEXT DEFAULT ('') NOT NULL, 
	spread_s INTEGER DEFAULT '0' NOT NULL, 
	command_by VARCHAR(64), 
	command_role VARCHAR(16), 
	on_blackout VARCHAR(8) DEFAULT 'skip' NOT NULL, 
	run_only_on VARCHAR(80) DEFAULT ('') NOT NULL, 
	never_on VARCHAR(80) DEFAULT ('') NOT NULL, 
	dst_gap VARCHAR(16) DEFAULT 'cronie' NOT NULL, 
	dst_fold VARCHAR(16) DEFAULT 'cronie' NOT NULL, 
	keep_successes_days INTEGER DEFAULT '0' NOT NULL, 
	keep_failures_days INTEGER DEFAULT '0' NOT NULL, 
	project_id INTEGER NOT NULL, 
	CONSTRAINT ck_jobs_dst_fold CHECK (dst_fold IN ('cronie', 'first', 'both', 'last')), 
	CONSTRAINT ck_jobs_catchup CHECK (catchup IN ('none', 'latest')), 
	CONSTRAINT ck_jobs_dst_gap CHECK (dst_gap IN ('cronie', 'run_at_gap_end', 'skip')), 
	CONSTRAINT ck_jobs_origin CHECK (origin IN ('bulk', 'individual')), 
	CONSTRAINT fk_jobs_target_id_targets FOREIGN KEY(target_id) REFERENCES targets (id), 
	CONSTRAINT ck_jobs_overlap CHECK (overlap IN ('allow', 'forbid')), 
	CONSTRAINT fk_jobs_project_id_projects FOREIGN KEY(project_id) REFERENCES projects (id), 
	CONSTRAINT uq_jobs_project_name UNIQUE (project_id, name)
);
CREATE TABLE "targets" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	name VARCHAR(64) NOT NULL, 
	kind VARCHAR(8) NOT NULL, 
	host VARCHAR(255), 
	port INTEGER, 
	user VARCHAR(64), 
	private_key_enc BLOB, 
	host_key TEXT, 
	labels JSON NOT NULL, 
	notes TEXT NOT NULL, 
	paired BOOLEAN NOT NULL, 
	paired_at DATETIME, 
	unpaired_at DATETIME, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	paused BOOLEAN DEFAULT 0 NOT NULL, 
	paused_reason TEXT, 
	paused_at DATETIME, 
	paused_by VARCHAR(64), 
	unpaired_disabled_jobs JSON, 
	timezone VARCHAR(64), 
	timezone_source VARCHAR(16), 
	via_id INTEGER, 
	host_ca TEXT, 
	client_cert_enc BLOB, 
	client_cert_expires_at DATETIME, 
	reach VARCHAR(16), 
	reach_at DATETIME, 
	reach_since DATETIME, 
	reach_error VARCHAR(300), 
	host_ca_rule_id INTEGER, 
	project_id INTEGER NOT NULL, shard INTEGER DEFAULT 0 NOT NULL, 
	CONSTRAINT ck_targets_kind CHECK (kind IN ('ssh', 'local', 'jump')), 
	CONSTRAINT fk_targets_via_id_targets FOREIGN KEY(via_id) REFERENCES targets (id), 
	CONSTRAINT fk_targets_project_id_projects FOREIGN KEY(project_id) REFERENCES projects (id), 
	CONSTRAINT uq_targets_project_name UNIQUE (project_id, name)
);
CREATE TABLE "notification_rules" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	channel_id INTEGER NOT NULL, 
	job_id INTEGER, 
	on_failure BOOLEAN NOT NULL, 
	on_late BOOLEAN NOT NULL, 
	on_recovery BOOLEAN NOT NULL, 
	created_at DATETIME NOT NULL, 
	group_wait_s FLOAT DEFAULT '30' NOT NULL, 
	group_interval_s FLOAT DEFAULT '300' NOT NULL, 
	repeat_interval_s FLOAT DEFAULT '14400' NOT NULL, 
	failures_before INTEGER DEFAULT '1' NOT NULL, 
	successes_before INTEGER DEFAULT '1' NOT NULL, 
	project_id INTEGER NOT NULL, 
	CONSTRAINT fk_notification_rules_channel_id_notification_channels FOREIGN KEY(channel_id) REFERENCES notification_channels (id) ON DELETE CASCADE, 
	CONSTRAINT fk_notification_rules_job_id_jobs FOREIGN KEY(job_id) REFERENCES jobs (id) ON DELETE CASCADE, 
	CONSTRAINT fk_notification_rules_project_id_projects FOREIGN KEY(project_id) REFERENCES projects (id)
);
CREATE TABLE "silences" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	job_id INTEGER, 
	job_name VARCHAR(64), 
	target_id INTEGER, 
	target_name VARCHAR(64), 
	selector VARCHAR(512), 
	starts_at DATETIME NOT NULL, 
	ends_at DATETIME NOT NULL, 
	created_by VARCHAR(64) NOT NULL, 
	reason TEXT NOT NULL, 
	created_at DATETIME NOT NULL, 
	expired_by VARCHAR(64), 
	project_id INTEGER NOT NULL, 
	CONSTRAINT fk_silences_project_id_projects FOREIGN KEY(project_id) REFERENCES projects (id)
);
CREATE TABLE "blackouts" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	name VARCHAR(64) NOT NULL, 
	reason TEXT NOT NULL, 
	job_name VARCHAR(64), 
	target_name VARCHAR(64), 
	selector VARCHAR(512), 
	zone VARCHAR(64) NOT NULL, 
	kind VARCHAR(8) NOT NULL, 
	start_wall VARCHAR(19), 
	end_wall VARCHAR(19), 
	cron VARCHAR(255), 
	duration_s INTEGER, 
	until DATETIME, 
	expires_at DATETIME, 
	created_by VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_by VARCHAR(64) NOT NULL, 
	updated_at DATETIME NOT NULL, 
	lifted_by VARCHAR(64), 
	lifted_at DATETIME, 
	project_id INTEGER NOT NULL, 
	CONSTRAINT ck_blackouts_kind CHECK (kind IN ('once', 'cron')), 
	CONSTRAINT fk_blackouts_project_id_projects FOREIGN KEY(project_id) REFERENCES projects (id)
);
CREATE TABLE "api_tokens" (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	user_id INTEGER NOT NULL, 
	name VARCHAR(64) NOT NULL, 
	token_hash VARCHAR(64) NOT NULL, 
	prefix VARCHAR(16) NOT NULL, 
	created_at DATETIME NOT NULL, 
	last_used_at DATETIME, 
	revoked_at DATETIME, 
	expires_at DATETIME, 
	scope VARCHAR(8) DEFAULT 'write' NOT NULL, 
	project_id INTEGER, 
	role VARCHAR(16), 
	CONSTRAINT uq_api_tokens_token_hash UNIQUE (token_hash), 
	CONSTRAINT fk_api_tokens_user_id_users FOREIGN KEY(user_id) REFERENCES users (id) ON DELETE CASCADE, 
	CONSTRAINT fk_api_tokens_project_id_projects FOREIGN KEY(project_id) REFERENCES projects (id) ON DELETE CASCADE
);
CREATE TABLE "users" (
	id INTEGER NOT NULL, 
	name VARCHAR(64) NOT NULL, 
	password_hash VARCHAR(255) NOT NULL, 
	role VARCHAR(16) NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	identity_provider VARCHAR(255), 
	subject VARCHAR(255), 
	CONSTRAINT pk_users PRIMARY KEY (id), 
	CONSTRAINT uq_users_identity UNIQUE (identity_provider, subject), 
	CONSTRAINT uq_users_name UNIQUE (name), 
	CONSTRAINT ck_users_role CHECK (role IN ('none', 'viewer', 'operator', 'admin'))
);
CREATE TABLE cluster_settings (
	id INTEGER NOT NULL, 
	shards INTEGER NOT NULL, 
	created_at DATETIME NOT NULL, 
	CONSTRAINT pk_cluster_settings PRIMARY KEY (id), 
	CONSTRAINT ck_cluster_settings_one_row CHECK (id = 1), 
	CONSTRAINT ck_cluster_settings_shards CHECK (shards >= 1)
);
INSERT INTO "cluster_settings" VALUES (1, 1, CURRENT_TIMESTAMP);
CREATE TABLE "cluster_ownership" (
	id INTEGER NOT NULL, 
	owner_node_id VARCHAR(32), 
	generation BIGINT NOT NULL, 
	draining BOOLEAN NOT NULL, 
	transfer_id INTEGER, 
	lease_expires_at DATETIME, 
	updated_at DATETIME NOT NULL, 
	shard INTEGER DEFAULT 0 NOT NULL, 
	CONSTRAINT pk_cluster_ownership PRIMARY KEY (id), 
	CONSTRAINT uq_cluster_ownership_shard UNIQUE (shard)
);
CREATE TABLE "project_roles" (
	user_id INTEGER NOT NULL, 
	project_id INTEGER NOT NULL, 
	role VARCHAR(16) NOT NULL, 
	source VARCHAR(8) NOT NULL, 
	CONSTRAINT pk_project_roles PRIMARY KEY (user_id, project_id), 
	CONSTRAINT fk_project_roles_project_id_projects FOREIGN KEY(project_id) REFERENCES projects (id) ON DELETE CASCADE, 
	CONSTRAINT fk_project_roles_user_id_users FOREIGN KEY(user_id) REFERENCES users (id) ON DELETE CASCADE, 
	CONSTRAINT ck_project_roles_role CHECK (role IN ('viewer', 'operator', 'admin')), 
	CONSTRAINT ck_project_roles_source CHECK (source IN ('manual', 'sso'))
);
CREATE TABLE cluster_members (
	id INTEGER NOT NULL, 
	node_id VARCHAR(32) NOT NULL, 
	worker INTEGER NOT NULL, 
	weight FLOAT NOT NULL, 
	started_at DATETIME NOT NULL, 
	heartbeat_at DATETIME NOT NULL, 
	lease_expires_at DATETIME NOT NULL, 
	CONSTRAINT pk_cluster_members PRIMARY KEY (id), 
	CONSTRAINT ck_cluster_members_worker CHECK (worker >= 0), 
	CONSTRAINT ck_cluster_members_weight CHECK (weight >= 0), 
	CONSTRAINT uq_cluster_members_node_worker UNIQUE (node_id, worker)
);
CREATE TABLE run_counts (
	minute DATETIME NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	shard INTEGER NOT NULL, 
	n BIGINT NOT NULL, 
	CONSTRAINT pk_run_counts PRIMARY KEY (minute, status, shard)
);
CREATE TABLE shard_pins (
	shard INTEGER NOT NULL, 
	node_id VARCHAR(32) NOT NULL, 
	pinned_by VARCHAR(64) NOT NULL, 
	pinned_at DATETIME NOT NULL, 
	CONSTRAINT pk_shard_pins PRIMARY KEY (shard), 
	CONSTRAINT ck_shard_pins_shard CHECK (shard >= 0)
);
DELETE FROM sqlite_sequence;
INSERT INTO "sqlite_sequence" VALUES ('assignments', 0);
INSERT INTO "sqlite_sequence" VALUES ('runs', 0);
INSERT INTO "sqlite_sequence" VALUES ('projects', 1);
INSERT INTO "sqlite_sequence" VALUES ('jobs', 0);
INSERT INTO "sqlite_sequence" VALUES ('targets', 0);
INSERT INTO "sqlite_sequence" VALUES ('notification_rules', 0);
INSERT INTO "sqlite_sequence" VALUES ('silences', 0);
INSERT INTO "sqlite_sequence" VALUES ('blackouts', 0);
INSERT INTO "sqlite_sequence" VALUES ('api_tokens', 0);
INSERT INTO "runs_fts"("runs_fts") VALUES ('rebuild');
CREATE INDEX ix_audit_events_action ON audit_events (action);
CREATE INDEX ix_audit_events_actor ON audit_events (actor);
CREATE INDEX ix_audit_events_at ON audit_events (at);
CREATE INDEX ix_audit_events_target_name ON audit_events (target_name);
CREATE INDEX ix_web_sessions_expires_at ON web_sessions (expires_at);
CREATE INDEX ix_web_sessions_user_id ON web_sessions (user_id);
CREATE INDEX ix_cluster_nonces_seen_at ON cluster_nonces (seen_at);
CREATE INDEX ix_notification_deliveries_channel_id ON notification_deliveries (channel_id);
CREATE INDEX ix_notification_deliveries_due ON notification_deliveries (status, next_attempt_at);
CREATE INDEX ix_execution_claims_live ON execution_claims (state, deadline_at);
CREATE INDEX ix_execution_claims_run_id ON execution_claims (run_id);
CREATE INDEX ix_job_versions_job_name ON job_versions (job_name);
CREATE INDEX ix_assignments_due ON assignments (enabled, next_fire_at);
CREATE INDEX ix_assignments_target_id ON assignments (target_id);
CREATE INDEX ix_runs_scheduled ON runs (scheduled_for);
CREATE INDEX ix_runs_finished ON runs (finished_at);
CREATE INDEX ix_runs_target_name_slot ON runs (target_name, scheduled_for, id);
CREATE INDEX ix_runs_job_slot ON runs (job_id, scheduled_for, status);
CREATE INDEX ix_runs_target_started ON runs (target_id, started_at);
CREATE INDEX ix_runs_status_slot ON runs (status, scheduled_for, id);
CREATE INDEX ix_runs_job_started ON runs (job_id, started_at);
CREATE INDEX ix_runs_job_name_slot ON runs (job_name, scheduled_for, id);
CREATE INDEX ix_runs_status ON runs (status);
CREATE TRIGGER runs_fts_insert AFTER INSERT ON runs WHEN coalesce(new.stdout_head, '') || coalesce(new.stdout_tail, '') || coalesce(new.stderr_head, '') || coalesce(new.stderr_tail, '') || coalesce(new.error, '') != '' BEGIN INSERT INTO runs_fts(rowid, stdout_head, stdout_tail, stderr_head, stderr_tail, error) VALUES (new.id, new.stdout_head, new.stdout_tail, new.stderr_head, new.stderr_tail, new.error); END;
CREATE TRIGGER runs_fts_delete AFTER DELETE ON runs WHEN coalesce(old.stdout_head, '') || coalesce(old.stdout_tail, '') || coalesce(old.stderr_head, '') || coalesce(old.stderr_tail, '') || coalesce(old.error, '') != '' BEGIN INSERT INTO runs_fts(runs_fts, rowid, stdout_head, stdout_tail, stderr_head, stderr_tail, error) VALUES ('delete', old.id, old.stdout_head, old.stdout_tail, old.stderr_head, old.stderr_tail, old.error); END;
CREATE TRIGGER runs_fts_update AFTER UPDATE OF stdout_head, stdout_tail, stderr_head, stderr_tail, error ON runs BEGIN INSERT INTO runs_fts(runs_fts, rowid, stdout_head, stdout_tail, stderr_head, stderr_tail, error) SELECT 'delete', old.id, old.stdout_head, old.stdout_tail, old.stderr_head, old.stderr_tail, old.error WHERE coalesce(old.stdout_head, '') || coalesce(old.stdout_tail, '') || coalesce(old.stderr_head, '') || coalesce(old.stderr_tail, '') || coalesce(old.error, '') != ''; INSERT INTO runs_fts(rowid, stdout_head, stdout_tail, stderr_head, stderr_tail, error) SELECT new.id, new.stdout_head, new.stdout_tail, new.stderr_head, new.stderr_tail, new.error WHERE coalesce(new.stdout_head, '') || coalesce(new.stdout_tail, '') || coalesce(new.stderr_head, '') || coalesce(new.stderr_tail, '') || coalesce(new.error, '') != ''; END;
CREATE INDEX ix_assignments_newest_finished_status ON assignments (newest_finished_status);
CREATE INDEX ix_runs_target_reached ON runs (target_id, started_at) WHERE status IN ('succeeded', 'failed', 'timed_out');
CREATE INDEX ix_runs_target_connect_error ON runs (target_id, started_at) WHERE status = 'connect_error';
CREATE INDEX ix_runs_assignment_succeeded ON runs (assignment_id, scheduled_for, attempt) WHERE status = 'succeeded';
CREATE INDEX ix_notification_deliveries_incident_id ON notification_deliveries (incident_id);
CREATE INDEX ix_incidents_opened_at ON incidents (opened_at);
CREATE UNIQUE INDEX uq_incidents_open ON incidents (job_id, cause) WHERE status = 'open' AND target_id IS NULL;
CREATE UNIQUE INDEX uq_incidents_open_host ON incidents (target_id) WHERE status = 'open' AND target_id IS NOT NULL;
CREATE INDEX ix_incidents_resolved_at ON incidents (resolved_at);
CREATE INDEX ix_sso_logins_expires_at ON sso_logins (expires_at);
CREATE INDEX ix_target_shares_project_id ON target_shares (project_id);
CREATE INDEX ix_jobs_target_id ON jobs (target_id);
CREATE INDEX ix_jobs_project_id ON jobs (project_id);
CREATE INDEX ix_targets_down ON targets (reach_since) WHERE reach IN ('refused', 'timeout', 'auth_failed', 'host_key_changed', 'error');
CREATE INDEX ix_targets_via_id ON targets (via_id);
CREATE INDEX ix_targets_project_id ON targets (project_id);
CREATE INDEX ix_notification_rules_channel_id ON notification_rules (channel_id);
CREATE INDEX ix_notification_rules_project_id ON notification_rules (project_id);
CREATE INDEX ix_silences_ends_at ON silences (ends_at);
CREATE INDEX ix_silences_project_id ON silences (project_id);
CREATE INDEX ix_blackouts_expires_at ON blackouts (expires_at);
CREATE INDEX ix_blackouts_project_id ON blackouts (project_id);
CREATE INDEX ix_api_tokens_user_id ON api_tokens (user_id);
CREATE INDEX ix_audit_events_project_id_at ON audit_events (project_id, at);
CREATE INDEX ix_incidents_project_id ON incidents (project_id);
CREATE TRIGGER run_counts_insert AFTER INSERT ON runs WHEN new.status <> 'queued' BEGIN INSERT INTO run_counts (minute, status, shard, n) VALUES (substr(new.scheduled_for, 1, 17) || '00.000000', new.status, new.shard, 1) ON CONFLICT (minute, status, shard) DO UPDATE SET n = n + (1); DELETE FROM run_counts WHERE minute = substr(new.scheduled_for, 1, 17) || '00.000000' AND status = new.status AND shard = new.shard AND n = 0; END;
CREATE TRIGGER run_counts_delete AFTER DELETE ON runs WHEN old.status <> 'queued' BEGIN INSERT INTO run_counts (minute, status, shard, n) VALUES (substr(old.scheduled_for, 1, 17) || '00.000000', old.status, old.shard, -1) ON CONFLICT (minute, status, shard) DO UPDATE SET n = n + (-1); DELETE FROM run_counts WHERE minute = substr(old.scheduled_for, 1, 17) || '00.000000' AND status = old.status AND shard = old.shard AND n = 0; END;
CREATE TRIGGER run_counts_update_old AFTER UPDATE OF status, scheduled_for ON runs WHEN old.status <> 'queued' AND (old.status IS NOT new.status OR old.scheduled_for IS NOT new.scheduled_for) BEGIN INSERT INTO run_counts (minute, status, shard, n) VALUES (substr(old.scheduled_for, 1, 17) || '00.000000', old.status, old.shard, -1) ON CONFLICT (minute, status, shard) DO UPDATE SET n = n + (-1); DELETE FROM run_counts WHERE minute = substr(old.scheduled_for, 1, 17) || '00.000000' AND status = old.status AND shard = old.shard AND n = 0; END;
CREATE TRIGGER run_counts_update_new AFTER UPDATE OF status, scheduled_for ON runs WHEN new.status <> 'queued' AND (old.status IS NOT new.status OR old.scheduled_for IS NOT new.scheduled_for) BEGIN INSERT INTO run_counts (minute, status, shard, n) VALUES (substr(new.scheduled_for, 1, 17) || '00.000000', new.status, new.shard, 1) ON CONFLICT (minute, status, shard) DO UPDATE SET n = n + (1); DELETE FROM run_counts WHERE minute = substr(new.scheduled_for, 1, 17) || '00.000000' AND status = new.status AND shard = new.shard AND n = 0; END;
