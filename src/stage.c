/*
 * Compiled into every pipeline-stage library so that a stage whose folder is
 * still being filled in links; it defines nothing.
 */
typedef int ft_stage_translation_unit_is_not_empty;
