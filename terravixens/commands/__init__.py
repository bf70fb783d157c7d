"""The commands that are not operations: each module declares one command of `terravixens` (its arguments, its run
function, its exit codes, its examples: a terravixens.arguments.Definition) around a module that does the work
(terravixens.standalone, terravixens.specserver, terravixens.specclient). The command table
(terravixens.cli.COMMANDS) names each one as `"module:NAME"`; the operations' commands live in their own modules
under terravixens/operations/."""
