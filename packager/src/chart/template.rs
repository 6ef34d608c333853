//! Turns an object built from the declarations into a Helm template: the object is written as
//! YAML like every other generated file, with marks where the template reads the values, and
//! the marks are then replaced by Helm's template actions.
//!
//! A mark is either a scalar (a string the action's output replaces, quotes and all) or a
//! block: a map key (or a list item holding only that key) whose line the action's lines
//! replace, at that line's indentation. Marks sort after every key Kubernetes uses, so a
//! block never opens a list item by accident. Rendering fails if a mark is left over.

use serde_json::{Map, Value, json};

use super::super::yaml::{YamlError, to_yaml};

/// What a block mark becomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Block {
    /// `key:` and below it the YAML of the expression, whatever it holds.
    Entry {
        /// The key.
        key: String,
        /// A template expression (`.Values.resources`).
        expr: String,
    },
    /// `key:` and the YAML of the expression, only when the expression is not empty.
    OptionalEntry {
        /// The key.
        key: String,
        /// A template expression.
        expr: String,
    },
    /// The entries (of a map) or items (of a list) of the expression, where the mark sits,
    /// when it is not empty.
    Spread {
        /// A template expression.
        expr: String,
    },
    /// Lines of template text, each at the mark's indentation, `{indent}` replaced by it.
    Lines(Vec<String>),
}

impl Block {
    fn lines(&self, indent: usize) -> Vec<String> {
        let pad = " ".repeat(indent);
        match self {
            Block::Entry { key, expr } => vec![
                format!("{pad}{key}:"),
                format!("{{{{- toYaml {expr} | nindent {} }}}}", indent + 2),
            ],
            Block::OptionalEntry { key, expr } => vec![
                format!("{{{{- with {expr} }}}}"),
                format!("{pad}{key}:"),
                format!("{{{{- toYaml . | nindent {} }}}}", indent + 2),
                "{{- end }}".to_string(),
            ],
            Block::Spread { expr } => vec![
                format!("{{{{- with {expr} }}}}"),
                format!("{{{{- toYaml . | nindent {indent} }}}}"),
                "{{- end }}".to_string(),
            ],
            Block::Lines(lines) => lines
                .iter()
                .map(|l| format!("{pad}{}", l.replace("{indent}", &indent.to_string())))
                .collect(),
        }
    }
}

#[derive(Clone, Debug)]
enum Mark {
    Scalar(String),
    Block(Block),
}

/// The marks of one template, in the order they were made.
#[derive(Clone, Debug, Default)]
pub struct Template {
    marks: Vec<Mark>,
}

/// The text of mark `n`: it sorts after any lowercase key, and YAML writes it unquoted.
fn token(n: usize) -> String {
    format!("zzhelmmark{n}zz")
}

impl Template {
    /// No marks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A scalar the output of `{{ expr }}` replaces.
    pub fn scalar(&mut self, expr: &str) -> Value {
        self.marks.push(Mark::Scalar(expr.to_string()));
        Value::String(token(self.marks.len() - 1))
    }

    /// The key of a block mark, to insert into a map with a null value ([`Template::insert`]).
    pub fn block(&mut self, block: Block) -> String {
        self.marks.push(Mark::Block(block));
        token(self.marks.len() - 1)
    }

    /// Adds a block mark to the map `object`.
    pub fn insert(&mut self, object: &mut Value, block: Block) {
        let key = self.block(block);
        if let Some(map) = object.as_object_mut() {
            map.insert(key, Value::Null);
        }
    }

    /// A list item that holds only a block mark (for [`Block::Spread`] and [`Block::Lines`]).
    pub fn item(&mut self, block: Block) -> Value {
        let mut map = Map::new();
        map.insert(self.block(block), Value::Null);
        json!(map)
    }

    /// Writes `value` as YAML and replaces every mark.
    pub fn render(&self, value: &Value) -> Result<String, YamlError> {
        let text = to_yaml(value)?;
        let mut out = String::with_capacity(text.len());
        for line in text.lines() {
            out.push_str(&self.replace_line(line));
            out.push('\n');
        }
        if out.contains("zzhelmmark") {
            return Err(YamlError::Read(format!("a mark was left in:\n{out}")));
        }
        Ok(out)
    }

    fn replace_line(&self, line: &str) -> String {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        for (n, mark) in self.marks.iter().enumerate() {
            let Mark::Block(block) = mark else { continue };
            let key = format!("{}: null", token(n));
            if body == key {
                return block.lines(indent).join("\n");
            }
            if body.strip_prefix("- ") == Some(key.as_str()) {
                return block.lines(indent).join("\n");
            }
        }
        let mut line = line.to_string();
        for (n, mark) in self.marks.iter().enumerate().rev() {
            let Mark::Scalar(expr) = mark else { continue };
            let token = token(n);
            if !line.contains(&token) {
                continue;
            }
            let action = format!("{{{{ {expr} }}}}");
            for quoted in [format!("'{token}'"), format!("\"{token}\"")] {
                line = line.replace(&quoted, &action);
            }
            line = line.replace(&token, &action);
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_and_blocks_become_template_actions() {
        let mut template = Template::new();
        let mut value = json!({
            "spec": {
                "replicas": template.scalar(".Values.replicaCount"),
                "containers": [{"name": "manager", "env": [{"name": "A", "value": "b"}]}],
            },
        });
        let extra = template.item(Block::Spread {
            expr: ".Values.extraEnv".to_string(),
        });
        value["spec"]["containers"][0]["env"]
            .as_array_mut()
            .expect("a list")
            .push(extra);
        template.insert(
            &mut value["spec"]["containers"][0],
            Block::Entry {
                key: "resources".to_string(),
                expr: ".Values.resources".to_string(),
            },
        );
        let text = template.render(&value).expect("renders");
        assert!(
            text.contains("  replicas: {{ .Values.replicaCount }}\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "    - name: A\n      value: b\n{{- with .Values.extraEnv }}\n\
                 {{- toYaml . | nindent 4 }}\n{{- end }}\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("    resources:\n{{- toYaml .Values.resources | nindent 6 }}\n"),
            "{text}"
        );
    }

    #[test]
    fn a_mark_left_over_is_an_error() {
        let mut template = Template::new();
        let token = template.scalar(".Values.x");
        let mut other = Template::new();
        other.scalar(".Values.y");
        assert!(other.render(&json!({"a": token})).is_ok());
        assert!(Template::new().render(&json!({"a": token})).is_err());
    }
}
