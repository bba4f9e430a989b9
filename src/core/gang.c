/*
 * Gangs: the names of their sources and the rules by which a victim set
 * breaks one (gang.h). The victim search reads the rules as
 * ft_victim_gang_t (victims.h); the state applies them to its PodGroups and
 * running members.
 */
#include <flextopo/gang.h>

#include <stdlib.h>
#include <string.h>

static const char *const source_names[FT_GANG_SOURCES] = {
    "none", "workload", "coscheduling", "label"};

const char *ft_gang_source_name(ft_gang_source_t source)
{
	return (unsigned)source < FT_GANG_SOURCES ? source_names[source]
						  : "unknown";
}

void ft_pod_group_dispose(ft_pod_group_t *group)
{
	if (!group)
		return;
	free(group->ns);
	free(group->name);
	memset(group, 0, sizeof(*group));
}

bool ft_gang_rules(bool *whole, uint32_t *slack, ft_gang_source_t source,
		   const ft_pod_group_t *group, uint32_t running)
{
	*whole = false;
	*slack = 0;
	if (source == FT_GANG_NONE || (source == FT_GANG_WORKLOAD && !group))
		return false;
	if (source == FT_GANG_LABEL || !group || group->whole) {
		*whole = true;
		return true;
	}
	*slack = running > group->min ? running - group->min : 0;
	return true;
}

static bool alnum_lower(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One RFC 1123 label of a subdomain: [a-z0-9]([-a-z0-9]*[a-z0-9])? */
static bool valid_label(const char *s, size_t len)
{
	if (!len || len > 63 || !alnum_lower(s[0]) || !alnum_lower(s[len - 1]))
		return false;
	for (size_t i = 1; i + 1 < len; i++)
		if (!alnum_lower(s[i]) && s[i] != '-')
			return false;
	return true;
}

bool ft_gang_valid_name(const char *name)
{
	size_t len = name ? strlen(name) : 0;
	const char *label = name;

	if (!len || len > 253)
		return false;
	for (const char *dot; (dot = strchr(label, '.')); label = dot + 1)
		if (!valid_label(label, (size_t)(dot - label)))
			return false;
	return valid_label(label, strlen(label));
}
